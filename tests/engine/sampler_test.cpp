// The sampler (rule N6): greedy ties, a counter-based RNG, top-k / top-p / min-p limits,
// logprob order.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/detmath.h"
#include "core/simd.h"
#include "simd_levels.h"

namespace invar {
namespace sampler_test {

TEST(Sampler, GreedyTiesGoToTheSmallerId) {
  SamplerScratch s;
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 2.0f};
  EXPECT_EQ(sample_token(logits.data(), 4, SamplingParams{}, 0, s), 1);
}

// sample_bits(1, 5) as the definition gives it — two splitmix64 finalisers, mix(mix(seed) ^
// position) — computed apart from this code (Python integers, 64-bit wrap).
constexpr uint64_t kSampleBits_1_5 = 12773366489153039575ull;

TEST(Sampler, RngIsAFunctionOfSeedAndPosition) {
  // A fixed value: the counter-based generator is a function of (seed, position) only, the same
  // in every build and process (pinned, not compared with itself).
  EXPECT_EQ(sample_bits(1, 5), kSampleBits_1_5);
  EXPECT_NE(sample_bits(1, 5), sample_bits(1, 6));
  EXPECT_NE(sample_bits(1, 5), sample_bits(2, 5));
  for (int64_t p = 0; p < 1000; ++p) {
    const double u = sample_uniform(3, p);
    ASSERT_TRUE(u >= 0.0 && u < 1.0);
  }
}

TEST(Sampler, TemperatureFollowsTheDistribution) {
  SamplerScratch s;
  const std::vector<float> logits = {0.0f, std::log(3.0f)};  // p = 0.25, 0.75
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 9;
  int ones = 0;
  const int n = 4000;
  for (int64_t pos = 0; pos < n; ++pos) ones += sample_token(logits.data(), 2, p, pos, s);
  EXPECT_NEAR(static_cast<double>(ones) / n, 0.75, 0.03);
  // Same (seed, position): same token, whatever happened in between.
  const int32_t t = sample_token(logits.data(), 2, p, 17, s);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(sample_token(logits.data(), 2, p, 17, s), t);
}

TEST(Sampler, TopKAndTopPLimitTheCandidates) {
  SamplerScratch s;
  const std::vector<float> logits = {0.5f, 2.0f, 1.9f, 0.1f, 1.0f};
  SamplingParams p;
  p.temperature = 5.0f;  // nearly flat: without limits every id appears
  std::vector<int> seen(5, 0);
  for (int64_t pos = 0; pos < 500; ++pos)
    ++seen[static_cast<size_t>(sample_token(logits.data(), 5, p, pos, s))];
  for (int c : seen) EXPECT_GT(c, 0);
  p.top_k = 2;
  for (int64_t pos = 0; pos < 200; ++pos) {
    const int32_t t = sample_token(logits.data(), 5, p, pos, s);
    EXPECT_TRUE(t == 1 || t == 2) << t;
  }
  p.top_k = 0;
  p.top_p = 0.05f;  // only the best candidate reaches it
  for (int64_t pos = 0; pos < 200; ++pos) EXPECT_EQ(sample_token(logits.data(), 5, p, pos, s), 1);
}

TEST(Sampler, MinPKeepsCandidatesWithinAFactorOfTheBest) {
  SamplerScratch s;
  // Relative probabilities at temperature 1: 1, 0.6, 0.5, 0.3, 0.1.
  const std::vector<float> logits = {0.0f, std::log(0.6f), std::log(0.5f), std::log(0.3f),
                                     std::log(0.1f)};
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 4;
  std::vector<int> seen(5, 0);
  for (int64_t pos = 0; pos < 2000; ++pos)
    ++seen[static_cast<size_t>(sample_token(logits.data(), 5, p, pos, s))];
  EXPECT_GT(seen[3] + seen[4], 0) << "without min_p the tail is drawn";
  p.min_p = 0.45f;
  std::vector<int> kept(5, 0);
  for (int64_t pos = 0; pos < 2000; ++pos)
    ++kept[static_cast<size_t>(sample_token(logits.data(), 5, p, pos, s))];
  EXPECT_EQ(kept[3] + kept[4], 0) << "p < 0.45 p_max must be dropped";
  for (int i = 0; i < 3; ++i) EXPECT_GT(kept[i], 0) << i;
  // Renormalised over the survivors (1, 0.6, 0.5), as vLLM does before top-p.
  EXPECT_NEAR(kept[0] / 2000.0, 1.0 / 2.1, 0.04);
  // top_p then acts on the survivors only: 0.5 of (1 + 0.6 + 0.5) is reached by the best.
  p.top_p = 0.45f;
  for (int64_t pos = 0; pos < 200; ++pos) EXPECT_EQ(sample_token(logits.data(), 5, p, pos, s), 0);
  // Temperature scales the ratio: at T = 2 the 0.3 candidate weighs sqrt(0.3) ≈ 0.55 ≥ 0.45.
  p.top_p = 1.0f;
  p.temperature = 2.0f;
  std::vector<int> warm(5, 0);
  for (int64_t pos = 0; pos < 2000; ++pos)
    ++warm[static_cast<size_t>(sample_token(logits.data(), 5, p, pos, s))];
  EXPECT_GT(warm[3], 0);
  EXPECT_EQ(warm[4], 0);
}

TEST(Sampler, LogprobsOrderedByValueThenId) {
  SamplerScratch s;
  const std::vector<float> logits = {1.0f, 2.0f, 2.0f, 0.0f};
  float lp = 0;
  std::vector<TokenLogprob> top;
  logprobs_top(logits.data(), 4, 3, 3, s, &lp, &top);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].id, 1);
  EXPECT_EQ(top[1].id, 2);
  EXPECT_EQ(top[2].id, 0);
  EXPECT_EQ(top[0].logprob, top[1].logprob);
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x));
  EXPECT_NEAR(lp, -std::log(sum), 1e-5);
}

// sample_token against its definition, sample_token_ref (a full sort of the row), on random rows
// of every shape the engine hands it: the chosen token must be the same for every parameter
// combination. Rows are small enough to keep the test in milliseconds, large enough (up to a
// few thousand candidates) that the radix sort runs its passes.
namespace {

enum class RowKind { gaussian, peaked, ties, signed_zeros, all_equal, masked, huge, one_allowed };
constexpr RowKind kRowKinds[] = {RowKind::gaussian,     RowKind::peaked,     RowKind::ties,
                                 RowKind::signed_zeros, RowKind::all_equal,  RowKind::masked,
                                 RowKind::huge,         RowKind::one_allowed};

std::vector<float> random_row(RowKind kind, int64_t n, std::mt19937_64& rng) {
  const float inf = std::numeric_limits<float>::infinity();
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> small(-3, 3);
  std::vector<float> row(static_cast<size_t>(n));
  const float sd = std::exp(std::uniform_real_distribution<float>(-4.0f, 2.5f)(rng));
  for (auto& v : row) {
    switch (kind) {
      case RowKind::gaussian:
      case RowKind::masked:
      case RowKind::one_allowed:
        v = sd * normal(rng);
        break;
      case RowKind::peaked:  // a model's row: a bulk, and a few ids far above it
        v = 2.5f * normal(rng) + (rng() % 500 == 0 ? 15.0f + 10.0f * normal(rng) : 0.0f);
        break;
      case RowKind::ties:  // few distinct values: long runs of equal logits
        v = 0.5f * float(small(rng));
        break;
      case RowKind::signed_zeros:  // −0 and +0 rank equal (ties by id)
        v = rng() % 3 == 0 ? -0.0f : rng() % 2 ? 0.0f : -1.0f * float(rng() % 4);
        break;
      case RowKind::all_equal:
        v = 1.25f;
        break;
      case RowKind::huge:  // differences overflow to −inf
        v = (rng() % 2 ? 3e38f : -3e38f) * (rng() % 4 == 0 ? 1.0f : 0.5f);
        break;
    }
  }
  if (kind == RowKind::masked)  // a grammar mask or a logit_bias of −inf on most ids
    for (auto& v : row)
      if (rng() % 8 != 0) v = -inf;
  if (kind == RowKind::one_allowed) {
    const size_t keep = rng() % row.size();
    for (size_t i = 0; i < row.size(); ++i)
      if (i != keep) row[i] = -inf;
  }
  if (kind == RowKind::masked && rng() % 4 == 0)  // logit_bias: a large positive push
    row[rng() % row.size()] += 30.0f;
  return row;
}

}  // namespace

TEST(Sampler, RankedHeadChoosesAsTheFullSortOnRandomRows) {
  const float temperatures[] = {1e-30f, 1e-6f, 0.05f, 0.3f, 0.7f, 1.0f, 1.5f, 10.0f, 1e6f, 1e30f};
  const float top_ps[] = {1.0f, 0.9f, 0.5f, 1e-7f, 0.99999994f, 0.0f};
  const float min_ps[] = {0.0f, 1e-30f, 1e-17f, 1e-5f, 0.05f, 0.5f, 1.0f, 2.0f, -1.0f};
  const int64_t top_ks[] = {0, 0, 0, 33, 200};
  std::mt19937_64 rng(51);
  SamplerScratch s_new, s_ref;
  const SimdLevel best_level = simd_active();
  const std::vector<SimdLevel> levels = test::simd_levels_to_test();
  int64_t checked = 0;
  for (int round = 0; round < 240; ++round) {
    const RowKind kind = kRowKinds[round % 8];
    const int64_t n = round % 3 == 0 ? 1 + int64_t(rng() % 40) : 300 + int64_t(rng() % 3000);
    const std::vector<float> row = random_row(kind, n, rng);
    for (int draw = 0; draw < 8; ++draw) {
      SamplingParams p;
      p.temperature = temperatures[rng() % std::size(temperatures)];
      p.top_p = top_ps[rng() % std::size(top_ps)];
      p.min_p = min_ps[rng() % std::size(min_ps)];
      p.top_k = top_ks[rng() % std::size(top_ks)];
      p.seed = rng();
      if (draw == 7) {
        // min_p equal to a candidate's own weight: it must survive (w < min_p drops, w = min_p
        // stays), so the head's cut must sit below ln(min_p), not at it.
        const float best = *std::max_element(row.begin(), row.end());
        const float w = det_exp((row[rng() % row.size()] - best) / p.temperature);
        if (w > 0.0f) p.min_p = w;
      }
      const int64_t position = int64_t(rng() % 100000);
      const int32_t want = sample_token_ref(row.data(), n, p, position, s_ref);
      for (SimdLevel level : levels) {  // the weights' lane-wise copies included
        simd_set(level);
        const int32_t got = sample_token(row.data(), n, p, position, s_new);
        simd_set(best_level);
        ASSERT_EQ(got, want) << "round " << round << " kind " << int(kind) << " n " << n << " T "
                             << p.temperature << " top_p " << p.top_p << " min_p " << p.min_p
                             << " top_k " << p.top_k << " position " << position << " simd "
                             << simd_name(level);
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 240 * 8);
}

// The weights the ranked head leaves out (z < −38) must be too small to move a double sum that
// starts at 1: below half its ulp, 2^−53. Checked on every 61st float of (−200, −38) by bit
// pattern (negative floats grow in magnitude with their bits) and on the first one past the cut.
TEST(Sampler, WeightsPastTheHeadCannotMoveASum) {
  const auto bits_of = [](float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
  };
  const auto float_of = [](uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  };
  for (uint32_t b = bits_of(-38.0f) + 1; b < bits_of(-200.0f); b += 61)
    ASSERT_LT(det_exp(float_of(b)), 0x1p-53f) << float_of(b);
  EXPECT_LT(det_exp(float_of(bits_of(-38.0f) + 1)), 0x1p-53f);
  EXPECT_EQ(det_exp(-__builtin_inff()), 0.0f);
}

// Weights between the head's cut and 2^−53 still move sums by an ulp, and that can decide which
// candidates top-p keeps: two equal best ids and a tail of ids 34 below them (each ~2^−49). With
// the tail the total is 2 + ε and top_p = 0.5 needs both best ids; a head cut above the tail
// would make it 2 and keep the first alone.
TEST(Sampler, TheTailUnderTheCutDecidesTopP) {
  std::vector<float> row(2000, -34.0f);
  row[5] = 0.0f;
  row[900] = 0.0f;
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.5f;
  SamplerScratch s;
  int second = 0;
  for (int64_t pos = 0; pos < 64; ++pos) {
    const int32_t t = sample_token(row.data(), int64_t(row.size()), p, pos, s);
    ASSERT_EQ(t, sample_token_ref(row.data(), int64_t(row.size()), p, pos, s));
    second += t == 900;
  }
  EXPECT_GT(second, 0);
}

}  // namespace sampler_test
}  // namespace invar
