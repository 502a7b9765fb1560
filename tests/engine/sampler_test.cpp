// The sampler (rule N6): greedy ties, a counter-based RNG, top-k / top-p / min-p limits,
// logprob order.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace invar {
namespace sampler_test {

TEST(Sampler, GreedyTiesGoToTheSmallerId) {
  SamplerScratch s;
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 2.0f};
  EXPECT_EQ(sample_token(logits.data(), 4, SamplingParams{}, 0, s), 1);
}

TEST(Sampler, RngIsAFunctionOfSeedAndPosition) {
  EXPECT_EQ(sample_bits(1, 5), sample_bits(1, 5));
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

}  // namespace sampler_test
}  // namespace invar
