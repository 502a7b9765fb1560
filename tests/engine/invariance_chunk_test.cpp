// Contracts C2 and C4: B's logits are the same bits whatever the token budget per step
// (1, 7, 64, 4096), the block size (16, 64) and the thread count (1, 2) — cold and warm.
#include "invariance_harness.h"

namespace invar::testing_engine {
namespace invariance_chunk_test {

class ChunkInvariance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    m_ = &model_get(GetParam());
    std::mt19937 rng(43);
    doc_ = tokens_random(rng, 100, m_->hparams().n_vocab);
    a_ = concat(doc_, tokens_random(rng, 9, m_->hparams().n_vocab));
    b_ = concat(doc_, tokens_random(rng, 30, m_->hparams().n_vocab));
    cold_ = run_sequential(*m_, config_base(), {request_make(b_, 4, true)})[0];
  }
  // Cold B, then B after A, under cfg; both compared with the reference cold run.
  void check(const EngineConfig& cfg, int64_t expect_cached, const std::string& what) {
    const auto cold = run_sequential(*m_, cfg, {request_make(b_, 4, true)});
    expect_same_bits(cold_, cold[0], static_cast<int64_t>(b_.size()), what + ", cold");
    const auto warm =
        run_sequential(*m_, cfg, {request_make(a_, 2, false), request_make(b_, 4, true)});
    EXPECT_EQ(warm[1].cached_tokens, expect_cached) << what;
    expect_same_bits(cold_, warm[1], static_cast<int64_t>(b_.size()), what + ", after A");
  }
  const Model* m_ = nullptr;
  std::vector<int32_t> doc_, a_, b_;
  Outcome cold_;
};

TEST_P(ChunkInvariance, TokenBudgets) {
  for (int64_t budget : {1, 7, 64, 4096}) {
    EngineConfig cfg = config_base();
    cfg.max_batch_tokens = budget;
    check(cfg, 96, "budget " + std::to_string(budget));
  }
}

TEST_P(ChunkInvariance, BlockSizes) {
  EngineConfig cfg = config_base();
  cfg.block_size = 64;
  cfg.max_batch_tokens = 7;
  check(cfg, 64, "block 64");
  cfg.block_size = 16;
  cfg.checkpoint_every = 3;  // checkpoints only at 48, 96
  check(cfg, 96, "block 16, checkpoint every 3");
}

TEST_P(ChunkInvariance, Threads) {
  EngineConfig cfg = config_base();
  cfg.threads = 2;
  cfg.max_batch_tokens = 64;
  check(cfg, 96, "2 threads");
}

INSTANTIATE_TEST_SUITE_P(Models, ChunkInvariance, ::testing::ValuesIn(reference_models()),
                         [](const auto& info) {
                           return info.param == "qwen35-tiny" ? std::string("qwen35")
                                                              : std::string("qwen3next");
                         });

}  // namespace invariance_chunk_test
}  // namespace invar::testing_engine
