// Contract C3: B's logits are the same bits alone and with 1, 3 or 15 other requests of random
// lengths in flight — prefill chunks and decode tokens of others in the same steps, some of
// them sharing B's document (so B may hit blocks they are writing).
#include "invariance_harness.h"

namespace invar::testing_engine {
namespace invariance_batch_test {

class BatchInvariance : public ::testing::TestWithParam<std::string> {};

TEST_P(BatchInvariance, AloneVersusCrowds) {
  const Model& m = model_get(GetParam());
  const int64_t V = m.hparams().n_vocab;
  std::mt19937 rng(44);
  const auto doc = tokens_random(rng, 80, V);
  const auto b = concat(doc, tokens_random(rng, 25, V));
  EngineConfig cfg = config_base();
  cfg.max_batch_tokens = 64;
  const Outcome alone = run_sequential(m, cfg, {request_make(b, 6, true)})[0];
  for (int n_others : {1, 3, 15}) {
    std::vector<GenerationRequest> reqs;
    for (int i = 0; i < n_others; ++i) {
      const int64_t len = 5 + static_cast<int64_t>(rng() % 150);
      auto p =
          i % 3 == 0 ? concat(doc, tokens_random(rng, len % 40, V)) : tokens_random(rng, len, V);
      GenerationRequest r = request_make(p, 1 + static_cast<int64_t>(rng() % 10), false);
      r.sampling.temperature = i % 2 ? 0.8f : 0.0f;
      r.sampling.seed = static_cast<uint64_t>(i);
      reqs.push_back(r);
    }
    // B in the middle of the arrivals: others are prefilling and decoding around it.
    reqs.insert(reqs.begin() + n_others / 2, request_make(b, 6, true));
    const auto out = run_together(m, cfg, reqs);
    const Outcome& ob = out[static_cast<size_t>(n_others / 2)];
    expect_same_bits(alone, ob, static_cast<int64_t>(b.size()),
                     "with " + std::to_string(n_others) + " others");
    // The condition really happened: some other request was reporting while B was.
    int overlapping = 0;
    for (size_t i = 0; i < out.size(); ++i)
      if (i != static_cast<size_t>(n_others / 2))
        overlapping += out[i].first_event < ob.last_event && ob.first_event < out[i].last_event;
    EXPECT_GT(overlapping, 0) << "B never shared the engine with another request";
    for (const auto& o : out) EXPECT_TRUE(o.finish == FinishReason::length) << o.error;
  }
}

TEST_P(BatchInvariance, UnderPreemption) {
  // A budget far below the crowd's needs: decode growth preempts the newest requests, which
  // recompute (mostly from the cache) — B's bits must not notice.
  const Model& m = model_get(GetParam());
  const int64_t V = m.hparams().n_vocab;
  std::mt19937 rng(46);
  const auto b = tokens_random(rng, 70, V);
  EngineConfig cfg = config_base();
  cfg.max_batch_tokens = 32;
  const Outcome alone = run_sequential(m, cfg, {request_make(b, 12, true)})[0];
  cfg.cache_bytes = cache_bytes_for(m, 16, 12, 1);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 8; ++i)
    reqs.push_back(
        request_make(tokens_random(rng, 20 + static_cast<int64_t>(rng() % 30), V), 40, false));
  reqs.insert(reqs.begin() + 3, request_make(b, 12, true));
  EngineMetrics metrics;
  const auto out = run_together(m, cfg, reqs, &metrics);
  EXPECT_GT(metrics.preemptions, 0u) << "the budget never forced a preemption";
  EXPECT_EQ(metrics.referenced_blocks, 0u);
  expect_same_bits(alone, out[3], static_cast<int64_t>(b.size()), "under preemption");
  for (const auto& o : out) EXPECT_EQ(o.finish, FinishReason::length) << o.error;
}

INSTANTIATE_TEST_SUITE_P(Models, BatchInvariance, ::testing::ValuesIn(reference_models()),
                         [](const auto& info) {
                           return info.param == "qwen35-tiny" ? std::string("qwen35")
                                                              : std::string("qwen3next");
                         });

}  // namespace invariance_batch_test
}  // namespace invar::testing_engine
