// Contract C1: request B's logits are the same bits cold, after a sibling A warmed the shared
// document (A shorter / longer, crossing B's last boundary or not), on a full hit, after
// evictions, and with the prefix cache off. Every cached case asserts it really hit.
#include "invariance_harness.h"

namespace invar::testing_engine {
namespace invariance_cache_test {

class CacheInvariance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    m_ = &model_get(GetParam());
    std::mt19937 rng(42);
    doc_ = tokens_random(rng, 100, m_->hparams().n_vocab);
    b_ = concat(doc_, tokens_random(rng, 20, m_->hparams().n_vocab));  // 120: last boundary 112
    rng_ = std::mt19937(7);
    cold_ = run_sequential(*m_, config_base(), {request_make(b_, 4, true)})[0];
    ASSERT_EQ(cold_.cached_tokens, 0);
  }
  std::vector<int32_t> a_with_tail(int64_t tail) {
    return concat(doc_, tokens_random(rng_, tail, m_->hparams().n_vocab));
  }
  const Model* m_ = nullptr;
  std::vector<int32_t> doc_, b_;
  std::mt19937 rng_;
  Outcome cold_;
};

TEST_P(CacheInvariance, AfterSiblingOfEveryShape) {
  const int64_t L = static_cast<int64_t>(b_.size());
  struct Arm {
    const char* name;
    int64_t tail;
  };
  // A = document + tail: shorter than B below its last boundary (112), shorter crossing it,
  // longer than B.
  for (const Arm& arm :
       {Arm{"A shorter, not crossing", 5}, Arm{"A shorter, crossing", 15}, Arm{"A longer", 40}}) {
    const auto out =
        run_sequential(*m_, config_base(),
                       {request_make(a_with_tail(arm.tail), 3, false), request_make(b_, 4, true)});
    EXPECT_EQ(out[1].cached_tokens, 96) << arm.name;
    expect_same_bits(cold_, out[1], L, arm.name);
  }
}

TEST_P(CacheInvariance, FullHitTwice) {
  const auto out = run_sequential(
      *m_, config_base(),
      {request_make(b_, 4, true), request_make(b_, 4, true), request_make(b_, 4, true)});
  expect_same_bits(cold_, out[0], static_cast<int64_t>(b_.size()), "first");
  EXPECT_EQ(out[1].cached_tokens, 112);
  expect_same_bits(cold_, out[1], static_cast<int64_t>(b_.size()), "second (full hit)");
  EXPECT_EQ(out[2].cached_tokens, 112) << "the third run must be a full hit too";
  expect_same_bits(cold_, out[2], static_cast<int64_t>(b_.size()), "third (full hit)");
}

TEST_P(CacheInvariance, AfterEvictionsUnderTinyBudget) {
  EngineConfig cfg = config_base();
  // Room for B's 8 blocks and 7 checkpoints: every later request must evict.
  cfg.cache_bytes = cache_bytes_for(*m_, 16, 8, 7);
  EngineMetrics metrics;
  const auto out =
      run_sequential(*m_, cfg,
                     {request_make(a_with_tail(15), 3, false), request_make(b_, 4, true),
                      request_make(a_with_tail(30), 2, false), request_make(b_, 4, true)},
                     &metrics);
  EXPECT_GT(metrics.evictions, 0u) << "the budget never forced an eviction";
  EXPECT_LE(metrics.resident_bytes, static_cast<uint64_t>(cfg.cache_bytes));
  EXPECT_EQ(metrics.referenced_blocks, 0u);
  EXPECT_GT(out[1].cached_tokens, 0);
  EXPECT_GT(out[3].cached_tokens, 0);
  expect_same_bits(cold_, out[1], static_cast<int64_t>(b_.size()), "B after A, tiny budget");
  expect_same_bits(cold_, out[3], static_cast<int64_t>(b_.size()), "B after evictions");
}

TEST_P(CacheInvariance, PrefixCacheOff) {
  EngineConfig cfg = config_base();
  cfg.prefix_cache = false;
  EngineMetrics metrics;
  const auto out = run_sequential(
      *m_, cfg, {request_make(a_with_tail(5), 3, false), request_make(b_, 4, true)}, &metrics);
  EXPECT_EQ(out[1].cached_tokens, 0);
  EXPECT_EQ(metrics.resident_blocks, 0u);
  expect_same_bits(cold_, out[1], static_cast<int64_t>(b_.size()), "prefix cache off");
}

INSTANTIATE_TEST_SUITE_P(Models, CacheInvariance, ::testing::ValuesIn(reference_models()),
                         [](const auto& info) {
                           return info.param == "qwen35-tiny" ? std::string("qwen35")
                                                              : std::string("qwen3next");
                         });

}  // namespace invariance_cache_test
}  // namespace invar::testing_engine
