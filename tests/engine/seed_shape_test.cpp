// The write-up's experiment (tests/data/seed/prefix-cache-changed-the-answer.txt) replayed at
// block size 16: A and B share a document; A under two blocks while B is over, A one token over
// the threshold, and A changed by nine tokens. In vLLM's align mode these arms differed; here
// every arm must give B the same bits as B cold, on the first (partial hit) and the second
// (full hit) run — and with every penalty on, one digest across the arms, a crowd and
// speculative decoding.
#include <set>

#include "invariance_harness.h"
#include "script_drafter.h"

namespace invar::testing_engine {
namespace seed_shape_test {

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

// Every penalty and a logit bias at once.
void penalise(SamplingParams& p) {
  p.repetition_penalty = 1.3f;
  p.frequency_penalty = 0.4f;
  p.presence_penalty = 0.5f;
  p.logit_bias = {{7, 2.0f}, {100, -5.0f}, {201, 1.0f}};
}

// With the penalties and logit_bias on, greedy and sampled, B gets one digest (token ids,
// logprobs, top-20 lists) across every arm above — cache cold, partial and full hits, budgets
// 7, 32 and 4096 — and among a crowd of other requests (some penalised differently), and with
// speculative decoding on; and the penalties really changed B's completion.
TEST_P(SeedShape, EveryArmOneDigestWithPenalties) {
  const Model& m = model_get(GetParam());
  const int64_t V = m.hparams().n_vocab;
  for (bool sampled : {false, true}) {
    std::mt19937 rng(45);
    const auto doc = tokens_random(rng, 20, V);
    const auto b = concat(doc, tokens_random(rng, 30, V));
    GenerationRequest rb = request_make(b, 20, true);
    rb.top_logprobs = 20;
    if (sampled) {
      rb.sampling.temperature = 0.9f;
      rb.sampling.seed = 11;
    }
    const std::string mode = sampled ? "sampled" : "greedy";
    const EngineConfig base = config_base();
    const Outcome unpenalised = run_sequential(m, base, {rb})[0];
    penalise(rb.sampling);
    const Outcome cold = run_sequential(m, base, {rb})[0];
    EXPECT_NE(unpenalised.generated, cold.generated) << mode << ": the penalties changed nothing";
    std::set<std::string> digests = {digest_of(cold)};
    for (int64_t budget : {7, 32, 4096}) {
      for (int64_t a_len : {31, 33, 24, 42}) {
        EngineConfig cfg = base;
        cfg.max_batch_tokens = budget;
        const auto a = concat(doc, tokens_random(rng, a_len - 20, V));
        const auto out = run_sequential(m, cfg, {request_make(a, 3, false), rb, rb});
        const std::string what =
            mode + ", A of " + std::to_string(a_len) + ", budget " + std::to_string(budget);
        EXPECT_EQ(out[1].cached_tokens, 16) << what;
        EXPECT_EQ(out[2].cached_tokens, 48) << what;
        expect_same_bits(cold, out[1], static_cast<int64_t>(b.size()), what + ", first B");
        expect_same_bits(cold, out[2], static_cast<int64_t>(b.size()), what + ", second B");
        digests.insert(digest_of(out[1]));
        digests.insert(digest_of(out[2]));
      }
    }
    // Among 7 others of random lengths, half of them penalised with other values.
    std::vector<GenerationRequest> crowd;
    for (int i = 0; i < 7; ++i) {
      GenerationRequest r = request_make(
          tokens_random(rng, 5 + static_cast<int64_t>(rng() % 60), V), 2 + i % 5, false);
      r.sampling.temperature = i % 2 ? 0.7f : 0.0f;
      r.sampling.seed = static_cast<uint64_t>(i);
      if (i % 2) {
        r.sampling.repetition_penalty = 0.8f;
        r.sampling.presence_penalty = -1.0f;
        r.sampling.logit_bias = {{7, -100.0f}};
      }
      crowd.push_back(r);
    }
    crowd.insert(crowd.begin() + 3, rb);
    EngineConfig batched = base;
    batched.max_batch_tokens = 64;
    const auto together = run_together(m, batched, crowd);
    int overlapping = 0;
    for (size_t i = 0; i < together.size(); ++i)
      if (i != 3)
        overlapping += together[i].first_event < together[3].last_event &&
                       together[3].first_event < together[i].last_event;
    EXPECT_GT(overlapping, 0) << mode << ": B never shared the engine with another request";
    expect_same_bits(cold, together[3], static_cast<int64_t>(b.size()), mode + ", in a crowd");
    digests.insert(digest_of(together[3]));
    // Speculative decoding on, cold then warm: drafts of B's own continuation, some wrong.
    EngineConfig spec = base;
    spec.spec = "ngram";  // replaced by the script drafter
    spec.draft.max_k = 4;
    const auto specs =
        run_sequential(m, spec, {rb, rb}, nullptr,
                       std::make_unique<ScriptDrafter>(
                           std::vector<std::vector<int32_t>>{concat(b, cold.generated)}));
    EXPECT_GT(specs[0].drafted + specs[1].drafted, specs[0].accepted + specs[1].accepted)
        << mode << ": no draft was rejected";
    for (const Outcome& o : specs) {
      EXPECT_GT(o.accepted, 0) << mode << ": no draft was kept";
      expect_same_bits(cold, o, static_cast<int64_t>(b.size()), mode + ", spec on");
      digests.insert(digest_of(o));
    }
    EXPECT_EQ(digests.size(), 1u) << mode << ": B's digest differs between arms";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, SeedShape, ::testing::ValuesIn(reference_models()),
                         [](const auto& info) {
                           return info.param == "qwen35-tiny" ? std::string("qwen35")
                                                              : std::string("qwen3next");
                         });

}  // namespace seed_shape_test
}  // namespace invar::testing_engine
