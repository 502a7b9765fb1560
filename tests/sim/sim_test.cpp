// The simulator against the facts in docs/prior-art/vllm-hybrid-prefix-cache.md and the
// write-up's experiment (document 3,100 tokens; A = 3,196, B = 4,000 in total; block 1600, MTP).
#include <gtest/gtest.h>

#include <cstdio>

#include "core/error.h"
#include "sim/simulator.h"

namespace invar::sim {
namespace sim_test {

Policy make_policy(PolicyKind k, SpecMethod spec = SpecMethod::mtp) {
  Policy p;
  p.kind = k;
  p.spec = spec;
  p.block_size = 1600;
  p.budget = 8192;
  return p;
}

// One request of P tokens, alone: the states it writes.
std::vector<int64_t> states_of(int64_t P, SpecMethod spec) {
  Trace t;
  t.requests.push_back({"R", "", P, "", 1});
  return simulate(t, make_policy(PolicyKind::vllm_align, spec)).runs.at(0).states_written;
}

TEST(Simulate, PriorArtWorkedResults) {
  using V = std::vector<int64_t>;
  EXPECT_EQ(states_of(2500, SpecMethod::mtp), V{});
  EXPECT_EQ(states_of(3199, SpecMethod::mtp), V{});
  EXPECT_EQ(states_of(3200, SpecMethod::mtp), (V{1600, 3200}));
  EXPECT_EQ(states_of(4799, SpecMethod::mtp), V{1600});
  EXPECT_EQ(states_of(5000, SpecMethod::mtp), V{3200});
  EXPECT_EQ(states_of(10000, SpecMethod::mtp), V{8000});
  EXPECT_EQ(states_of(2500, SpecMethod::none), V{1600});
  // ngram is not an EAGLE-family method: no back-off.
  EXPECT_EQ(states_of(2500, SpecMethod::ngram), V{1600});
}

TEST(Simulate, PriorArtSteps) {
  Trace t;
  t.requests.push_back({"R", "", 5000, "", 1});
  const auto r = simulate(t, make_policy(PolicyKind::vllm_align)).runs.at(0);
  ASSERT_EQ(r.steps.size(), 2u);
  EXPECT_EQ(r.steps[0].start, 0);
  EXPECT_EQ(r.steps[0].end, 3200);
  EXPECT_EQ(r.steps[1].end, 5000);
}

Trace writeup(int64_t a_total, int64_t b_total, int64_t b_repeat = 10, bool with_a = true) {
  Trace t;
  t.documents["D"] = 3100;
  if (with_a) t.requests.push_back({"A", "D", a_total - 3100, "", 1});
  t.requests.push_back({"B", "D", b_total - 3100, "", b_repeat});
  return t;
}

std::vector<RunResult> runs_of(const SimResult& r, const std::string& name) {
  std::vector<RunResult> out;
  for (const auto& x : r.runs)
    if (x.request == name) out.push_back(x);
  return out;
}

TEST(Simulate, WriteupCleanArmIsStable) {
  const auto b =
      runs_of(simulate(writeup(0, 4000, 10, false), make_policy(PolicyKind::vllm_align)), "B");
  ASSERT_EQ(b.size(), 10u);
  EXPECT_EQ(b[0].cached_tokens, 0);
  for (size_t i = 1; i < b.size(); ++i) {
    EXPECT_EQ(b[i].cached_tokens, 1600) << "run " << i + 1;
    EXPECT_FALSE(b[i].diverges) << "run " << i + 1;
  }
}

TEST(Simulate, WriteupContaminatedArmDiverges) {
  const auto b = runs_of(simulate(writeup(3196, 4000), make_policy(PolicyKind::vllm_align)), "B");
  ASSERT_EQ(b.size(), 10u);
  EXPECT_EQ(b[0].cached_tokens, 0);
  EXPECT_FALSE(b[0].diverges);
  for (size_t i = 1; i < b.size(); ++i) {
    EXPECT_EQ(b[i].cached_tokens, 1600) << "run " << i + 1;
    EXPECT_TRUE(b[i].diverges) << "run " << i + 1;
    EXPECT_EQ(b[i].signature, b[1].signature) << "runs 2..10 agree with each other";
  }
}

TEST(Simulate, WriteupLongAIsStable) {
  const auto b = runs_of(simulate(writeup(4689, 4000), make_policy(PolicyKind::vllm_align)), "B");
  for (const auto& r : b) EXPECT_FALSE(r.diverges) << "run " << r.run;
  EXPECT_EQ(b[1].cached_tokens, 1600);
}

TEST(Simulate, WriteupSweepFlipsAt3200) {
  const auto pts =
      simulate_sweep(writeup(3196, 4000, 3), make_policy(PolicyKind::vllm_align), "A", 3150, 3250);
  for (const auto& p : pts) {
    EXPECT_EQ(p.diverges, p.length <= 3199) << "A = " << p.length;
  }
}

TEST(Simulate, Pr54076MakesShortAStable) {
  const auto b =
      runs_of(simulate(writeup(3196, 4000), make_policy(PolicyKind::vllm_align_54076)), "B");
  EXPECT_EQ(b[0].cached_tokens, 0);  // the EAGLE drop makes the first run miss
  for (size_t i = 1; i < b.size(); ++i) {
    EXPECT_EQ(b[i].cached_tokens, 1600);
    EXPECT_FALSE(b[i].diverges);
  }
}

TEST(Simulate, InvarIsStableAndHitsAtOnce) {
  const auto res = simulate(writeup(3196, 4000), make_policy(PolicyKind::invar));
  const auto b = runs_of(res, "B");
  EXPECT_EQ(b[0].cached_tokens, 1600) << "A checkpointed the state at 1600 mid-chunk";
  for (const auto& r : res.runs) EXPECT_FALSE(r.diverges);
  const auto a = runs_of(res, "A");
  EXPECT_EQ(a[0].states_written, std::vector<int64_t>{1600});
  // Sweeping A never flips anything under invar.
  for (const auto& p :
       simulate_sweep(writeup(3196, 4000, 3), make_policy(PolicyKind::invar), "A", 3101, 5000)) {
    EXPECT_FALSE(p.diverges) << "A = " << p.length;
  }
}

// Beyond the write-up: A = 5,000 (states only at 3200, none at 1600) then B = 4,000.
// B's first run cannot use A's 3200 state (B only shares block 0 with A: the document ends at
// 3100) and the EAGLE drop leaves it cold; it stores its own state at 1600 with block 0's KV
// already written by A's [0,3200) step. Runs 2..10 restore KV from A's 3,200-token step and
// state from B's 1,600-token step: predicted to diverge, like the original 3,196 case.
TEST(Simulate, PredictionA5000) {
  const auto res = simulate(writeup(5000, 4000), make_policy(PolicyKind::vllm_align));
  const auto a = runs_of(res, "A");
  EXPECT_EQ(a[0].states_written, std::vector<int64_t>{3200});
  const auto b = runs_of(res, "B");
  std::printf("vllm-align, MTP, block 1600: A = 5000 then B = 4000 x10:\n");
  for (const auto& r : b) {
    std::printf("  B run %2lld: cached %4lld, states %s, predicted %s\n", (long long)r.run,
                (long long)r.cached_tokens, r.states_written.empty() ? "none" : "1600",
                r.diverges ? "diverges" : "stable");
  }
  EXPECT_EQ(b[0].cached_tokens, 0);
  for (size_t i = 1; i < b.size(); ++i) {
    EXPECT_EQ(b[i].cached_tokens, 1600);
    EXPECT_TRUE(b[i].diverges);
  }
}

TEST(Simulate, SaltIsolates) {
  Trace t = writeup(3196, 4000, 3);
  t.requests[0].salt = "other";
  const auto b = runs_of(simulate(t, make_policy(PolicyKind::vllm_align)), "B");
  for (const auto& r : b) EXPECT_FALSE(r.diverges);
}

TEST(Simulate, TraceErrorsNameTheField) {
  EXPECT_THROW(trace_parse("{"), Error);
  try {
    trace_parse(R"({"documents": {"D": 10}, "requests": [{"name": "A", "doc": "E"}]})");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("requests[0].doc"), std::string::npos) << e.what();
  }
  try {
    trace_parse(R"({"requests": [{"name": "A", "tail": -3}]})");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("requests[0].tail"), std::string::npos) << e.what();
  }
}

}  // namespace sim_test
}  // namespace invar::sim
