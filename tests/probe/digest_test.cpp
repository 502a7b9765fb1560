// Digests and run comparison: the byte format is pinned, a reorder of tied candidates moves the
// server-order digest only, a 1-ulp change moves both logprob digests, text equality hides both.
#include "probe/digest.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "probe/analysis.h"
#include "probe/report.h"

namespace invar::probe {
namespace digest_test {

Completion sample() {
  Completion c;
  c.text = " a b";
  for (int pos = 0; pos < 4; pos++) {
    TokenRecord r;
    r.chosen = {" a", 10 + pos, -0.5};
    r.top = {{" a", 10 + pos, -0.5}, {" b", 20, -1.25}, {" c", 30, -1.25}, {" d", 40, -3.0}};
    c.tokens.push_back(r);
  }
  return c;
}

TEST(ProbeDigest, Sha256KnownAnswer) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(ProbeDigest, OrderDigestFollowsTheDocumentedFormat) {
  Completion c;
  c.text = "x";
  TokenRecord r;
  r.chosen = {"x", 7, -0.25};
  r.top = {{"x", 7, -0.25}, {"y", -1, -2.0}};
  c.tokens.push_back(r);
  // 'I' + i64 id, 'T' + u32 length + bytes; logprob as little-endian binary64; u32 k.
  auto u64 = [](uint64_t v) {
    std::string s;
    for (int i = 0; i < 8; i++) s.push_back(char(v >> (8 * i)));
    return s;
  };
  auto u32 = [](uint32_t v) {
    std::string s;
    for (int i = 0; i < 4; i++) s.push_back(char(v >> (8 * i)));
    return s;
  };
  auto bits = [&](double d) {
    uint64_t b;
    std::memcpy(&b, &d, 8);
    return u64(b);
  };
  std::string expect = "I" + u64(7) + bits(-0.25) + u32(2) + "I" + u64(7) + bits(-0.25) + "T" +
                       u32(1) + "y" + bits(-2.0);
  Digests d = completion_digests(c);
  EXPECT_EQ(d.order, sha256_hex(expect));
  // Sorted: ids first (ascending), then token text.
  EXPECT_EQ(d.sorted, d.order);
  EXPECT_EQ(d.text, sha256_hex("x"));
}

TEST(ProbeDigest, ReorderOfTiesChangesOrderDigestOnly) {
  Completion a = sample();
  Completion b = sample();
  std::swap(b.tokens[2].top[1], b.tokens[2].top[2]);  // the tied " b" / " c"
  Digests da = completion_digests(a), db = completion_digests(b);
  EXPECT_NE(da.order, db.order);
  EXPECT_EQ(da.sorted, db.sorted);
  EXPECT_EQ(da.text, db.text);
  RunComparison c = runs_compare(a, b);
  EXPECT_EQ(c.first_divergent, 2);
  EXPECT_EQ(c.max_abs_dlogprob, 0.0);
  EXPECT_EQ(c.candidate_set_changes, 0);
}

TEST(ProbeDigest, OneUlpChangesBothLogprobDigests) {
  Completion a = sample();
  Completion b = sample();
  b.tokens[1].top[3].logprob = std::nextafter(-3.0, 0.0);
  Digests da = completion_digests(a), db = completion_digests(b);
  EXPECT_NE(da.order, db.order);
  EXPECT_NE(da.sorted, db.sorted);
  EXPECT_EQ(da.text, db.text);  // text equality is not evidence
  RunComparison c = runs_compare(a, b);
  EXPECT_EQ(c.first_divergent, 1);
  EXPECT_GT(c.max_abs_dlogprob, 0.0);
  EXPECT_LT(c.max_abs_dlogprob, 1e-14);
  ASSERT_EQ(c.dlogprob.size(), 4u);
  EXPECT_EQ(c.dlogprob[0], 0.0);
  EXPECT_GT(c.dlogprob[1], 0.0);
}

TEST(ProbeDigest, CandidateSetChangeAndChosenFlip) {
  Completion a = sample();
  Completion b = sample();
  b.tokens[1].top[3] = {" e", 50, -3.5};   // " d" left the list, " e" came in
  b.tokens[2].chosen = {" b", 20, -0.75};  // the chosen token flips at 2: compare no further
  b.tokens[2].top[0].logprob = -0.9;
  b.tokens[2].top[1].logprob = -0.75;
  b.tokens[3].top[1].logprob = -9;  // after the flip: must not count
  RunComparison c = runs_compare(a, b);
  EXPECT_EQ(c.first_divergent, 1);
  EXPECT_EQ(c.candidate_set_changes, 1);
  ASSERT_EQ(c.dlogprob.size(), 3u);  // positions 0, 1, 2
  // At 2 the shared candidate " b" moved from -1.25 to -0.75 (and " a" by 0.4).
  EXPECT_DOUBLE_EQ(c.max_abs_dlogprob, 0.5);
}

TEST(ProbeDigest, ShorterRunDivergesWhereItStops) {
  Completion a = sample();
  Completion b = sample();
  b.tokens.pop_back();
  EXPECT_EQ(runs_compare(a, b).first_divergent, 3);
  EXPECT_FALSE(runs_compare(a, a).first_divergent.has_value());
}

TEST(ProbeDigest, VerdictNeedsOneDigestPerArmAndAgreement) {
  Arm clean{"clean", ArmKind::clean, "B", "", 2};
  Arm nocache{"no-cache", ArmKind::no_cache, "B", "", 2};
  auto rec = [](const Completion& c) {
    RunRecord r;
    r.completion = c;
    r.digests = completion_digests(c);
    return r;
  };
  Completion a = sample(), b = sample();
  b.tokens[0].top[1].logprob = -1.5;
  Report same;
  same.arms = {arm_summarize(clean, {rec(a), rec(a)}), arm_summarize(nocache, {rec(a), rec(a)})};
  report_finish(same);
  EXPECT_EQ(same.verdict, "stable");
  // Each arm alone is stable, but they disagree with each other.
  Report apart;
  apart.arms = {arm_summarize(clean, {rec(a), rec(a)}), arm_summarize(nocache, {rec(b), rec(b)})};
  report_finish(apart);
  EXPECT_EQ(apart.verdict, "diverged");
  ASSERT_EQ(apart.disagreeing_groups.size(), 1u);
  Report within;
  within.arms = {arm_summarize(clean, {rec(a), rec(b)})};
  report_finish(within);
  EXPECT_EQ(within.verdict, "diverged");
  EXPECT_EQ(within.arms[0].distinct_order, 2);
  EXPECT_EQ(within.arms[0].first_divergent, 0);
}

TEST(ProbeReport, CachedTokensFoldAndTextShowsVerdict) {
  using V = std::vector<std::optional<int64_t>>;
  EXPECT_EQ(cached_tokens_compact(V{0, 5, 5, 5}), "0, 5\u00d73");
  EXPECT_EQ(cached_tokens_compact(V{0, 5, 0, 5, 0, 5}), "(0, 5)\u00d73");
  EXPECT_EQ(cached_tokens_compact(V{0, 0, 0}), "0\u00d73");
  EXPECT_EQ(cached_tokens_compact(V{std::nullopt, 7}), "n/a, 7");
  EXPECT_EQ(cached_tokens_compact(V{}), "-");
  Report r;
  r.target = "http://x:1";
  ArmSummary a;
  a.name = "clean";
  a.order_digests = {"d1", "d2"};
  a.distinct_order = 2;
  a.first_divergent = 4;
  r.arms = {a};
  report_finish(r);
  const std::string t = report_text(r);
  EXPECT_NE(t.find("verdict: diverged"), std::string::npos) << t;
  EXPECT_EQ(report_exit_code(r), 3);
  EXPECT_EQ(report_json(r)["arms"][0]["first_divergent_token"], 4);
}

}  // namespace digest_test
}  // namespace invar::probe
