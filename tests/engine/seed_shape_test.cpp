// The write-up's experiment (tests/data/seed/prefix-cache-changed-the-answer.txt) replayed at
// block size 16: A and B share a document; A under two blocks while B is over, A one token over
// the threshold, and A changed by nine tokens. In vLLM's align mode these arms differed; here
// every arm must give B the same bits as B cold, on the first (partial hit) and the second
// (full hit) run.
#include "invariance_harness.h"

namespace invar::testing_engine {
namespace {

class SeedShape : public ::testing::TestWithParam<std::string> {};

TEST_P(SeedShape, EveryArmBitIdentical) {
  const Model& m = model_get(GetParam());
  const int64_t V = m.hparams().n_vocab;
  std::mt19937 rng(45);
  const auto doc = tokens_random(rng, 20, V);
  const auto b = concat(doc, tokens_random(rng, 30, V));  // 50 tokens: over 2 blocks
  EngineConfig base = config_base();
  const Outcome cold = run_sequential(m, base, {request_make(b, 5, true)})[0];
  struct Arm {
    const char* name;
    int64_t a_len;
  };
  for (int64_t budget : {7, 32, 4096}) {
    for (const Arm& arm : {Arm{"A under 2 blocks", 31}, Arm{"A one token over", 33},
                           Arm{"A nine tokens shorter", 24}, Arm{"A nine tokens longer", 42}}) {
      EngineConfig cfg = base;
      cfg.max_batch_tokens = budget;
      const auto a = concat(doc, tokens_random(rng, arm.a_len - 20, V));
      const auto out = run_sequential(
          m, cfg, {request_make(a, 3, false), request_make(b, 5, true), request_make(b, 5, true)});
      const std::string what = std::string(arm.name) + ", budget " + std::to_string(budget);
      EXPECT_EQ(out[1].cached_tokens, 16) << what;  // the shared document's first block
      EXPECT_EQ(out[2].cached_tokens, 48) << what;  // B's own three blocks
      expect_same_bits(cold, out[1], static_cast<int64_t>(b.size()), what + ", first B");
      expect_same_bits(cold, out[2], static_cast<int64_t>(b.size()), what + ", second B");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, SeedShape, ::testing::ValuesIn(reference_models()),
                         [](const auto& info) {
                           return info.param == "qwen35-tiny" ? std::string("qwen35")
                                                              : std::string("qwen3next");
                         });

}  // namespace
}  // namespace invar::testing_engine
