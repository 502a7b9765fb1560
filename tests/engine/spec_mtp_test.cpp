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
// (the MTP head then reads the trunk's hidden rows of the cached positions from the blocks).
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

// The MTP drafter, recording the hidden rows the engine hands it and every proposal it makes.
class RecordingDrafter : public Drafter {
 public:
  explicit RecordingDrafter(const Model& m) : inner_(m), n_embd_(m.hparams().n_embd) {}
  std::string_view name() const override { return "mtp (recording)"; }
  bool wants_hidden() const override { return true; }
  std::unique_ptr<DraftSeq> seq_make(std::span<const int32_t> prompt) override {
    return inner_.seq_make(prompt);
  }
  void propose(std::span<DraftJob> jobs, ThreadPool& pool) override {
    inner_.propose(jobs, pool);
    for (const DraftJob& j : jobs) proposals.push_back(*j.out);
  }
  void hidden_observe(DraftSeq& seq, int64_t pos0, int64_t n, const float* hidden) override {
    for (int64_t i = 0; i < n; ++i)
      rows[pos0 + i].assign(hidden + i * n_embd_, hidden + (i + 1) * n_embd_);
    inner_.hidden_observe(seq, pos0, n, hidden);
  }
  std::map<int64_t, std::vector<float>> rows;   // position → the last row observed there
  std::vector<std::vector<int32_t>> proposals;  // every job's drafts, in order

 private:
  MtpDrafter inner_;
  int64_t n_embd_;
};

// One request's run and what its drafter saw and proposed.
struct Recorded {
  Outcome out;
  std::map<int64_t, std::vector<float>> rows;
  std::vector<std::vector<int32_t>> proposals;
};

// The requests one after another in one engine (warming its cache, and its lower tiers when
// cfg has some); what the last one got.
Recorded run_recorded(const Model& m, const EngineConfig& cfg,
                      const std::vector<GenerationRequest>& reqs) {
  auto drafter = std::make_unique<RecordingDrafter>(m);
  RecordingDrafter* rec = drafter.get();
  Engine engine(m, nullptr, cfg, std::move(drafter));
  Collector col;
  Recorded r;
  for (size_t i = 0; i < reqs.size(); ++i) {
    rec->rows.clear();
    rec->proposals.clear();
    engine.submit(reqs[i], col.sink(i));
    col.wait(i + 1);
    r.out = col.take(i);
  }
  r.rows = std::move(rec->rows);
  r.proposals = std::move(rec->proposals);
  return r;
}

// Warm drafts as cold: the drafter observed the same hidden row bits at every position (those
// served from the cache included), proposed the same drafts and had the same ones accepted.
void expect_same_drafting(const Recorded& cold, const Recorded& warm, const std::string& what) {
  EXPECT_EQ(warm.out.drafted, cold.out.drafted) << what;
  EXPECT_EQ(warm.out.accepted, cold.out.accepted) << what;
  EXPECT_EQ(warm.proposals, cold.proposals) << what << ": other drafts";
  ASSERT_EQ(warm.rows.size(), cold.rows.size()) << what << ": positions observed";
  for (const auto& [p, row] : cold.rows) {
    const auto it = warm.rows.find(p);
    ASSERT_TRUE(it != warm.rows.end()) << what << ": position " << p << " never observed";
    EXPECT_EQ(0, std::memcmp(it->second.data(), row.data(), row.size() * sizeof(float)))
        << what << ": hidden row of position " << p << " differs";
  }
}

// Many questions over one document: a request after a full hit (itself again) and after a
// partial one (another question over the same document) drafts exactly as it does cold.
TEST_P(SpecMtp, WarmDraftsAsCold) {
  const Model& m = mtp_model(GetParam());
  const int64_t V = m.hparams().n_vocab;
  std::mt19937 rng(31);
  const auto doc = tokens_random(rng, 29, V);
  const auto a = concat(doc, tokens_random(rng, 5, V)), b = concat(doc, tokens_random(rng, 5, V));
  for (bool sampled : {false, true}) {
    const GenerationRequest req_a = request_of(a, sampled, 3), req_b = request_of(b, sampled, 4);
    const std::string what =
        std::string(arch_name(GetParam())) + (sampled ? " sampled" : " greedy");
    const Outcome plain = run_sequential(m, config_of("none", 1, 1), {req_b})[0];
    const EngineConfig cfg = config_of("mtp", 4, 2);
    const Recorded cold = run_recorded(m, cfg, {req_b});
    const Recorded full = run_recorded(m, cfg, {req_b, req_b});
    const Recorded partial = run_recorded(m, cfg, {req_a, req_b});
    const auto n = int64_t(b.size());
    expect_same_bits(plain, cold.out, n, what + " cold");
    expect_same_bits(plain, full.out, n, what + " full hit");
    expect_same_bits(plain, partial.out, n, what + " partial hit");
    EXPECT_EQ(cold.out.cached_tokens, 0) << what;
    EXPECT_EQ(full.out.cached_tokens, 32) << what << ": every full block of the prompt";
    EXPECT_EQ(partial.out.cached_tokens, 24) << what << ": the document's full blocks";
    EXPECT_GT(cold.out.accepted, 0) << what;
    EXPECT_GT(cold.out.drafted, cold.out.accepted) << what;
    expect_same_drafting(cold, full, what + " full hit");
    expect_same_drafting(cold, partial, what + " partial hit");
  }
}

// The hidden rows travel through the disk tier with the blocks: a restart drafts as cold. A
// record written without them (a server without MTP) restores the KV and the drafter reads
// zeros for those positions: other drafts maybe, never another bit of the answer.
TEST_P(SpecMtp, DiskTierCarriesTheHiddenRows) {
  const Model& m = mtp_model(GetParam());
  const int64_t V = m.hparams().n_vocab, E = m.hparams().n_embd;
  std::mt19937 rng(37);
  const auto prompt = tokens_random(rng, 35, V);
  const GenerationRequest req = request_of(prompt, false, 0);
  const std::string arch = std::string(arch_name(GetParam()));
  const std::string dir = std::string(INVAR_BINARY_DIR) + "/tests/engine/spec-mtp-tier-" + arch;
  auto tiered = [&](const std::string& spec, const std::string& sub) {
    EngineConfig c = config_of(spec, 4, 2);
    c.tiers.cache_dir = dir + "/" + sub;
    c.fingerprint = "fp_spec_mtp_" + arch;
    return c;
  };
  std::filesystem::remove_all(dir);
  const Outcome plain = run_sequential(m, config_of("none", 1, 1), {req})[0];
  const Recorded cold = run_recorded(m, tiered("mtp", "with"), {req});
  const Recorded restarted = run_recorded(m, tiered("mtp", "with"), {req});
  const auto n = int64_t(prompt.size());
  expect_same_bits(plain, restarted.out, n, arch + " restored from disk");
  EXPECT_EQ(cold.out.cached_tokens, 0) << arch;
  EXPECT_EQ(restarted.out.cached_tokens, 32) << arch << ": the blocks came from the disk";
  expect_same_drafting(cold, restarted, arch + " restored from disk");

  run_sequential(m, tiered("none", "without"), {req});
  const Recorded absent = run_recorded(m, tiered("mtp", "without"), {req});
  expect_same_bits(plain, absent.out, n, arch + " restored without hidden rows");
  EXPECT_EQ(absent.out.cached_tokens, 32) << arch;
  ASSERT_TRUE(absent.rows.count(0));
  EXPECT_EQ(absent.rows.at(0), std::vector<float>(size_t(E), 0.0f)) << arch;
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Archs, SpecMtp,
                         ::testing::Values(Arch::qwen3next, Arch::qwen35, Arch::qwen35moe),
                         [](const auto& info) { return std::string(arch_name(info.param)); });

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
