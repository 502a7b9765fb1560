// Contract C5 with the model's own MTP head drafting (`--spec mtp`): every generated token and
// every logits row (hence every top-20 logprob list and digest) equals plain decoding bit for bit
// — greedy and seeded sampling, several k, 1 and 2 threads, cache cold and warm, batched with
// other requests, on every architecture — and the runs really accepted and rejected drafts.
//
// The models are generated with make-model's MtpKind::bigram: a random MTP head next to a random
// trunk almost never guesses right, so this one is built to agree often (the trunk mostly
// predicts from the current token, and the MTP block passes that token's embedding to the same
// LM head); the trunk's small context-dependent part makes the rest of the drafts wrong.
#include <filesystem>

#include "engine/drafter_mtp.h"
#include "invariance_harness.h"
#include "model/model_harness.h"

namespace invar::testing_engine {
namespace spec_mtp_test {

const Model& mtp_model(Arch arch) {
  static std::map<Arch, std::unique_ptr<Model>> models;
  auto& m = models[arch];
  if (!m) {
    const std::string dir = std::string(INVAR_BINARY_DIR) + "/tests/engine";
    std::filesystem::create_directories(dir);
    const std::string path = dir + "/spec-mtp-" + std::string(arch_name(arch)) + ".gguf";
    test::write_generated(test::tiny_model_config(arch, MtpKind::bigram), path,
                          std::string(INVAR_TEST_DATA_DIR) + "/models/qwen35-tiny.gguf");
    m = Model::load(path);
  }
  return *m;
}

EngineConfig config_of(const std::string& spec, int64_t k, int threads) {
  EngineConfig c = config_base();
  c.block_size = 8;
  c.threads = threads;
  c.spec = spec;
  c.draft.max_k = k;
  return c;
}

GenerationRequest request_of(const std::vector<int32_t>& prompt, bool sampled, uint64_t seed) {
  GenerationRequest r = request_make(prompt, 32, true);
  if (sampled) {
    r.sampling.temperature = 0.8f;
    r.sampling.seed = seed;
  }
  return r;
}

struct Totals {
  uint64_t drafted = 0, accepted = 0;
  void add(const EngineMetrics& em) {
    drafted += em.spec_drafted_total;
    accepted += em.spec_accepted_total;
  }
};

class SpecMtp : public ::testing::TestWithParam<Arch> {};

// Each spec request runs twice in one engine: cold, then warm from the blocks the first wrote
// (the MTP head then has no trunk hidden rows for the cached positions).
TEST_P(SpecMtp, EqualsPlainDecoding) {
  const Model& m = mtp_model(GetParam());
  ASSERT_TRUE(m.has_mtp());
  std::mt19937 rng(5);
  for (bool sampled : {false, true}) {
    Totals all;
    for (int64_t k : {1, 2, 4, 6}) {
      const auto prompt = tokens_random(rng, 19, m.hparams().n_vocab);
      const GenerationRequest req = request_of(prompt, sampled, 40 + uint64_t(k));
      const int threads = 1 + int(k % 2);
      const Outcome plain = run_sequential(m, config_of("none", 1, 3 - threads), {req})[0];
      EngineMetrics em;
      const auto spec = run_sequential(m, config_of("mtp", k, threads), {req, req}, &em);
      const std::string what = std::string(arch_name(GetParam())) +
                               (sampled ? " sampled" : " greedy") + " k=" + std::to_string(k) +
                               " threads=" + std::to_string(threads);
      expect_same_bits(plain, spec[0], int64_t(prompt.size()), what + " cold");
      expect_same_bits(plain, spec[1], int64_t(prompt.size()), what + " warm");
      EXPECT_EQ(spec[0].cached_tokens, 0) << what;
      EXPECT_GT(spec[1].cached_tokens, 0) << what << ": the warm run missed the cache";
      EXPECT_GT(em.spec_drafted_total, 0u) << what;
      all.add(em);
    }
    const std::string what =
        std::string(arch_name(GetParam())) + (sampled ? " sampled" : " greedy");
    std::printf("%s: %llu MTP drafts, %llu accepted\n", what.c_str(),
                static_cast<unsigned long long>(all.drafted),
                static_cast<unsigned long long>(all.accepted));
    EXPECT_GT(all.accepted, 0u) << what << ": no MTP draft was accepted";
    EXPECT_GT(all.drafted, all.accepted) << what << ": no MTP draft was rejected";
  }
}

// Batched: the request shares steps with others (drafting, prefilling, sampled, greedy) under a
// step budget that cuts drafts short and under one that does not.
TEST_P(SpecMtp, BatchedWithOthers) {
  const Model& m = mtp_model(GetParam());
  const int64_t V = m.hparams().n_vocab;
  std::mt19937 rng(23);
  const auto prompt = tokens_random(rng, 21, V);
  for (bool sampled : {false, true}) {
    const GenerationRequest req = request_of(prompt, sampled, 7);
    const Outcome plain = run_sequential(m, config_of("none", 1, 1), {req})[0];
    std::vector<GenerationRequest> reqs;
    for (int i = 0; i < 4; ++i) {
      GenerationRequest o = request_of(tokens_random(rng, 9 + i * 13, V), i % 2, 9);
      o.max_tokens = 8 + i * 6;
      reqs.push_back(o);
    }
    reqs.insert(reqs.begin() + 1, req);
    for (int64_t budget : {7, 4096}) {
      EngineConfig cfg = config_of("mtp", 4, 2);
      cfg.max_batch_tokens = budget;
      EngineMetrics em;
      const auto got = run_together(m, cfg, reqs, &em);
      const std::string what = std::string(arch_name(GetParam())) + " batched, budget " +
                               std::to_string(budget) + (sampled ? " sampled" : " greedy");
      expect_same_bits(plain, got[1], int64_t(prompt.size()), what);
      EXPECT_GT(em.spec_accepted_total, 0u) << what;
      EXPECT_GT(em.spec_drafted_total, em.spec_accepted_total) << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, SpecMtp,
                         ::testing::Values(Arch::qwen3next, Arch::qwen35, Arch::qwen35moe),
                         [](const auto& info) { return std::string(arch_name(info.param)); });

// The MTP drafter, recording the hidden rows the engine hands it.
class RecordingDrafter : public Drafter {
 public:
  explicit RecordingDrafter(const Model& m) : inner_(m), n_embd_(m.hparams().n_embd) {}
  std::string_view name() const override { return "mtp (recording)"; }
  bool wants_hidden() const override { return true; }
  std::unique_ptr<DraftSeq> seq_make(std::span<const int32_t> prompt) override {
    return inner_.seq_make(prompt);
  }
  void propose(std::span<DraftJob> jobs, ThreadPool& pool) override { inner_.propose(jobs, pool); }
  void hidden_observe(DraftSeq& seq, int64_t pos0, int64_t n, const float* hidden) override {
    for (int64_t i = 0; i < n; ++i)
      rows[pos0 + i].assign(hidden + i * n_embd_, hidden + (i + 1) * n_embd_);
    inner_.hidden_observe(seq, pos0, n, hidden);
  }
  std::map<int64_t, std::vector<float>> rows;  // position → the last row observed there

 private:
  MtpDrafter inner_;
  int64_t n_embd_;
};

// The drafter sees the trunk's hidden row of every position the request computed, once each
// verification settles, with the bits Model::forward gives for the whole sequence at once.
TEST_P(SpecMtp, DrafterSeesTheTrunksHiddenRows) {
  const Model& m = mtp_model(GetParam());
  const int64_t E = m.hparams().n_embd, V = m.hparams().n_vocab;
  std::mt19937 rng(8);
  const GenerationRequest req = request_of(tokens_random(rng, 13, V), false, 0);
  auto drafter = std::make_unique<RecordingDrafter>(m);
  RecordingDrafter* rec = drafter.get();
  EngineConfig cfg = config_of("mtp", 3, 2);
  cfg.max_batch_tokens = 5;  // the prompt in three chunks
  Engine engine(m, nullptr, cfg, std::move(drafter));
  Collector col;
  engine.submit(req, col.sink(0));
  col.wait(1);
  const Outcome got = col.take(0);
  EXPECT_GT(engine.metrics().spec_accepted_total, 0u);

  const std::vector<int32_t> all = concat(req.prompt, got.generated);
  const int64_t n = int64_t(all.size()) - 1;  // the last token never runs
  ASSERT_EQ(int64_t(rec->rows.size()), n);
  std::vector<float> kv(size_t(m.kv_block_floats(n))), state(size_t(m.state_floats()), 0.0f);
  std::vector<float> logits(static_cast<size_t>(V)), hidden(static_cast<size_t>(n * E));
  float* block = kv.data();
  SeqChunk c;
  c.tokens = all.data();
  c.n_tokens = n;
  c.state = state.data();
  c.kv_blocks = &block;
  c.block_size = n;
  c.logits = logits.data();
  c.hidden = hidden.data();
  ThreadPool pool(1);
  m.forward({&c, 1}, *m.scratch_make(n, 1), pool);
  for (int64_t p = 0; p < n; ++p) {
    ASSERT_TRUE(rec->rows.count(p)) << "position " << p << " never observed";
    EXPECT_EQ(0, std::memcmp(rec->rows[p].data(), hidden.data() + p * E, size_t(E) * 4))
        << "hidden row of position " << p << " differs";
  }
}

TEST(SpecMtpRefused, ModelWithoutTheBlock) {
  const Model& m = model_get("qwen3next-tiny");
  try {
    Engine engine(m, nullptr, config_of("mtp", 4, 1));
    FAIL() << "--spec mtp accepted a model without an MTP block";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no MTP block"), std::string::npos) << e.what();
  }
}

}  // namespace spec_mtp_test
}  // namespace invar::testing_engine
