// Contract C5: speculative decoding is a speed feature only. With n-gram drafts, every token id,
// every top-20 logprob list and every captured logits row equals plain decoding bit for bit —
// greedy and seeded sampling, k = 1..6, 1 and 2 threads, cache cold and warm, batched with other
// requests, on every architecture, with penalties and logit_bias on too — and the runs really
// did accept and reject drafts. A rejected draft leaves no trace in the prefix cache.
#include <unistd.h>

#include <filesystem>

#include "engine/drafter_make.h"
#include "engine/ngram_drafter.h"
#include "invariance_harness.h"
#include "model/model_harness.h"
#include "script_drafter.h"

namespace invar::testing_engine {
namespace spec_decode_test {

// qwen35moe has no reference file: the model tests' small random one.
const Model& qwen35moe_generated() {
  static std::unique_ptr<Model> m = [] {
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("invar-spec-moe-" + std::to_string(getpid()) + ".gguf"))
                                 .string();
    invar::test::write_tiny_qwen35moe(
        path, std::string(INVAR_TEST_DATA_DIR) + "/models/qwen35-tiny.gguf");
    auto model = Model::load(path);
    std::filesystem::remove(path);
    return model;
  }();
  return *m;
}

const Model& model_of(const std::string& name) {
  return name == "qwen35moe" ? qwen35moe_generated() : model_get(name);
}

// Everything a request reported, kept as raw bits.
struct Reported {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  std::vector<std::vector<TokenLogprob>> tops;
  std::map<int64_t, std::vector<float>> logits;
  int64_t cached_tokens = -1, drafted = 0, accepted = 0;
  FinishReason finish = FinishReason::none;
  bool done = false;
};

class Reporter {
 public:
  EventSink sink(size_t slot) {
    std::lock_guard lk(mu_);
    if (runs_.size() <= slot) runs_.resize(slot + 1);
    return [this, slot](RequestEvent&& ev) {
      std::lock_guard lk(mu_);
      Reported& r = runs_[slot];
      for (auto& [p, row] : ev.logits) r.logits[p] = std::move(row);
      if (ev.kind == EventKind::token) {
        r.ids.push_back(ev.token);
        r.logprobs.push_back(ev.logprob);
        r.tops.push_back(ev.top);
      }
      if (ev.kind == EventKind::finished) {
        r.cached_tokens = ev.usage.cached_tokens;
        r.drafted = ev.usage.draft_tokens;
        r.accepted = ev.usage.accepted_draft_tokens;
        r.finish = ev.finish;
        r.done = true;
        cv_.notify_all();
      }
    };
  }
  Reported wait(size_t slot) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return runs_.size() > slot && runs_[slot].done; });
    return runs_[slot];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Reported> runs_;
};

void expect_same(const Reported& plain, const Reported& spec, const std::string& what) {
  ASSERT_TRUE(plain.done && spec.done) << what;
  EXPECT_EQ(plain.finish, spec.finish) << what;
  ASSERT_EQ(plain.ids, spec.ids) << what;
  ASSERT_EQ(plain.tops.size(), spec.tops.size()) << what;
  EXPECT_EQ(0, std::memcmp(plain.logprobs.data(), spec.logprobs.data(),
                           plain.logprobs.size() * sizeof(float)))
      << what << ": token logprobs differ";
  for (size_t i = 0; i < plain.tops.size(); ++i) {
    ASSERT_EQ(plain.tops[i].size(), spec.tops[i].size()) << what << " token " << i;
    for (size_t j = 0; j < plain.tops[i].size(); ++j) {
      EXPECT_EQ(plain.tops[i][j].id, spec.tops[i][j].id) << what << " token " << i;
      EXPECT_EQ(0, std::memcmp(&plain.tops[i][j].logprob, &spec.tops[i][j].logprob, 4))
          << what << " token " << i << " candidate " << j;
    }
  }
  // A warm run computes fewer prompt positions; every generated token's row is computed.
  ASSERT_GE(spec.logits.size(), spec.ids.size()) << what << ": captured rows";
  for (const auto& [p, row] : spec.logits) {
    const auto it = plain.logits.find(p);
    ASSERT_TRUE(it != plain.logits.end()) << what << ": no plain logits at " << p;
    EXPECT_EQ(0, std::memcmp(row.data(), it->second.data(), row.size() * sizeof(float)))
        << what << ": logits differ at position " << p;
  }
}

// A prompt whose text repeats (what n-gram drafts feed on), then a random tail.
std::vector<int32_t> prompt_repeating(std::mt19937& rng, int64_t n_vocab) {
  const auto unit = tokens_random(rng, 9, n_vocab);
  std::vector<int32_t> p;
  for (int i = 0; i < 5; ++i) p = concat(p, unit);
  return concat(p, tokens_random(rng, 6, n_vocab));
}

GenerationRequest request_of(const std::vector<int32_t>& prompt, bool sampled, uint64_t seed) {
  GenerationRequest r = request_make(prompt, 40, true);
  r.top_logprobs = 20;
  if (sampled) {
    r.sampling.temperature = 1.3f;
    r.sampling.seed = seed;
  }
  return r;
}

// Runs reqs in one engine, each after the previous finished (so later ones may hit the cache);
// with a drafter of the test's when one is given, else the one cfg.spec names.
std::vector<Reported> run_in_order(const Model& m, const EngineConfig& cfg,
                                   const std::vector<GenerationRequest>& reqs,
                                   std::unique_ptr<Drafter> drafter = nullptr,
                                   EngineMetrics* metrics = nullptr) {
  auto engine = drafter ? std::make_unique<Engine>(m, nullptr, cfg, std::move(drafter))
                        : std::make_unique<Engine>(m, nullptr, cfg);
  Reporter runs;
  std::vector<Reported> out;
  for (size_t i = 0; i < reqs.size(); ++i) {
    engine->submit(reqs[i], runs.sink(i));
    out.push_back(runs.wait(i));
  }
  if (metrics) *metrics = engine->metrics();
  return out;
}

EngineConfig config_plain(int threads) {
  EngineConfig c = config_base();
  c.block_size = 8;
  c.threads = threads;
  return c;
}

EngineConfig config_spec(int64_t k, int threads) {
  EngineConfig c = config_plain(threads);
  c.spec = "ngram";
  c.draft.max_k = k;
  c.draft.ngram_min = 1;
  c.draft.ngram_max = 3;
  return c;
}

// The request's whole plain-decoding sequence, for the script drafter.
std::vector<int32_t> script_of(const GenerationRequest& r, const Reported& plain) {
  return concat(r.prompt, plain.ids);
}

class SpecDecode : public ::testing::TestWithParam<std::string> {};

// k = 1..6, threads alternating, greedy and seeded, script and n-gram drafts; each spec request
// runs twice in one engine (cold, then warm from the blocks the first wrote) and must equal
// the plain run both times.
TEST_P(SpecDecode, EqualsPlainDecoding) {
  const Model& m = model_of(GetParam());
  std::mt19937 rng(12);
  int64_t ngram_drafted = 0, ngram_accepted = 0;
  uint64_t none_kept = 0, all_kept = 0;  // verifications that kept no draft / all k
  for (bool sampled : {false, true}) {
    for (int64_t k = 1; k <= 6; ++k) {
      const auto prompt = prompt_repeating(rng, m.hparams().n_vocab);
      const GenerationRequest req = request_of(prompt, sampled, 100 + static_cast<uint64_t>(k));
      const int threads = 1 + static_cast<int>(k % 2);
      const Reported plain = run_in_order(m, config_plain(3 - threads), {req})[0];
      EXPECT_EQ(plain.drafted, 0);
      const std::string what = GetParam() + (sampled ? " sampled" : " greedy") +
                               " k=" + std::to_string(k) + " threads=" + std::to_string(threads);
      EngineMetrics em;
      const auto scripted = run_in_order(
          m, config_spec(k, threads), {req, req},
          std::make_unique<ScriptDrafter>(std::vector<std::vector<int32_t>>{script_of(req, plain)}),
          &em);
      const auto ngram = run_in_order(m, config_spec(k, threads), {req, req});
      for (size_t i = 0; i < 2; ++i) {
        const std::string run = what + (i == 0 ? " cold" : " warm");
        expect_same(plain, scripted[i], run + " script");
        expect_same(plain, ngram[i], run + " ngram");
        EXPECT_GT(scripted[i].accepted, 0) << run;
        EXPECT_GT(scripted[i].drafted, scripted[i].accepted) << run;
        ngram_drafted += ngram[i].drafted;
        ngram_accepted += ngram[i].accepted;
      }
      EXPECT_EQ(scripted[0].cached_tokens, 0) << what;
      EXPECT_GT(scripted[1].cached_tokens, 0) << what << ": the warm run missed the cache";
      EXPECT_GT(ngram[1].cached_tokens, 0) << what << ": the warm run missed the cache";
      // Metrics: drafted and accepted totals, and a histogram of kept drafts per verification.
      EXPECT_EQ(em.spec_drafted_total,
                static_cast<uint64_t>(scripted[0].drafted + scripted[1].drafted));
      EXPECT_EQ(em.spec_accepted_total,
                static_cast<uint64_t>(scripted[0].accepted + scripted[1].accepted));
      ASSERT_EQ(em.spec_accepted_hist.size(), static_cast<size_t>(k + 1));
      uint64_t steps = 0, kept = 0;
      for (size_t i = 0; i <= static_cast<size_t>(k); ++i) {
        steps += em.spec_accepted_hist[i];
        kept += i * em.spec_accepted_hist[i];
      }
      EXPECT_EQ(steps, em.spec_verifications_total);
      EXPECT_EQ(kept, em.spec_accepted_total);
      none_kept += em.spec_accepted_hist[0];
      if (k > 1) all_kept += em.spec_accepted_hist[static_cast<size_t>(k)];
    }
  }
  std::printf("%s n-gram: %lld drafted, %lld accepted\n", GetParam().c_str(),
              static_cast<long long>(ngram_drafted), static_cast<long long>(ngram_accepted));
  EXPECT_GT(ngram_drafted, ngram_accepted) << "n-gram drafts were never rejected";
  EXPECT_GT(none_kept, 0u) << "no verification rejected its first draft";
  EXPECT_GT(all_kept, 0u) << "no verification kept all k drafts";
}

// Where random weights do repeat themselves (qwen35-tiny under greedy decoding falls into
// short loops), n-gram drafts are accepted, and the answer is still plain decoding's.
TEST(SpecDecodeNgram, AcceptsWhereTheTextRepeats) {
  const Model& m = model_get("qwen35-tiny");
  std::mt19937 rng(12);
  int64_t accepted = 0;
  for (int64_t k = 1; k <= 6; ++k) {
    const GenerationRequest req = request_of(prompt_repeating(rng, m.hparams().n_vocab), false, 0);
    const Reported plain = run_in_order(m, config_plain(1), {req})[0];
    const Reported spec = run_in_order(m, config_spec(k, 2), {req})[0];
    expect_same(plain, spec, "k=" + std::to_string(k));
    accepted += spec.accepted;
  }
  EXPECT_GT(accepted, 0) << "no n-gram draft was ever accepted";
}

// Batched: the spec request shares steps with others — some decoding with drafts, some
// prefilling, one with prompt logprobs (every row), one without drafts — under a step budget
// that cuts drafts short and under one that does not.
TEST_P(SpecDecode, BatchedWithOthers) {
  const Model& m = model_of(GetParam());
  const int64_t V = m.hparams().n_vocab;
  std::mt19937 rng(31);
  const auto prompt = prompt_repeating(rng, V);
  for (bool sampled : {false, true}) {
    const GenerationRequest req = request_of(prompt, sampled, 5);
    const Reported plain = run_in_order(m, config_plain(1), {req})[0];
    std::vector<GenerationRequest> reqs;
    for (int i = 0; i < 5; ++i) {
      GenerationRequest o = request_of(
          i % 2 ? prompt_repeating(rng, V) : tokens_random(rng, 10 + i * 17, V), i % 2, 9);
      o.max_tokens = 10 + i * 7;
      if (i == 3) o.prompt_logprobs = 2;
      reqs.push_back(o);
    }
    reqs.insert(reqs.begin() + 2, req);
    for (int64_t budget : {7, 4096}) {
      EngineConfig cfg = config_spec(4, 2);
      cfg.max_batch_tokens = budget;
      Engine engine(m, nullptr, cfg,
                    std::make_unique<ScriptDrafter>(
                        std::vector<std::vector<int32_t>>{script_of(req, plain)}));
      Reporter runs;
      for (size_t i = 0; i < reqs.size(); ++i) engine.submit(reqs[i], runs.sink(i));
      for (size_t i = 0; i < reqs.size(); ++i) runs.wait(i);
      const Reported got = runs.wait(2);
      const std::string what = GetParam() + " batched, budget " + std::to_string(budget) +
                               (sampled ? " sampled" : " greedy");
      expect_same(plain, got, what);
      EXPECT_GT(got.accepted, 0) << what;
      EXPECT_GT(got.drafted, got.accepted) << what;
      // Others (wrong guesses) were verified alongside.
      const EngineMetrics em = engine.metrics();
      EXPECT_GT(em.spec_drafted_total, static_cast<uint64_t>(got.drafted)) << what;
    }
  }
}

// Penalties and logit_bias on: verification penalises row j with the tokens verified before it
// (the drafts kept so far), which are the tokens plain decoding generated there, so spec equals
// plain decoding — greedy and sampled, cold and warm, drafts kept and rejected — and the
// penalties really changed the completion.
TEST_P(SpecDecode, PenalisedEqualsPlainDecoding) {
  const Model& m = model_of(GetParam());
  std::mt19937 rng(13);
  for (bool sampled : {false, true}) {
    for (int64_t k : {2, 5}) {
      GenerationRequest req = request_of(prompt_repeating(rng, m.hparams().n_vocab), sampled,
                                         200 + static_cast<uint64_t>(k));
      const Reported unpenalised = run_in_order(m, config_plain(1), {req})[0];
      req.sampling.repetition_penalty = 1.25f;
      req.sampling.frequency_penalty = 0.3f;
      req.sampling.presence_penalty = 0.4f;
      req.sampling.logit_bias = {{3, 1.5f}, {50, -2.0f}};
      const Reported plain = run_in_order(m, config_plain(1), {req})[0];
      const std::string what =
          GetParam() + (sampled ? " sampled" : " greedy") + " penalised k=" + std::to_string(k);
      EXPECT_NE(plain.ids, unpenalised.ids) << what << ": the penalties changed nothing";
      const auto scripted =
          run_in_order(m, config_spec(k, 2), {req, req},
                       std::make_unique<ScriptDrafter>(
                           std::vector<std::vector<int32_t>>{script_of(req, plain)}));
      // Drafts of the unpenalised continuation: right where the penalties changed nothing.
      const auto unscripted =
          run_in_order(m, config_spec(k, 1), {req},
                       std::make_unique<ScriptDrafter>(
                           std::vector<std::vector<int32_t>>{script_of(req, unpenalised)}));
      const auto ngram = run_in_order(m, config_spec(k, 1), {req});
      for (size_t i = 0; i < 2; ++i) {
        const std::string run = what + (i == 0 ? " cold" : " warm");
        expect_same(plain, scripted[i], run + " script");
        EXPECT_GT(scripted[i].accepted, 0) << run;
        EXPECT_GT(scripted[i].drafted, scripted[i].accepted) << run;
      }
      EXPECT_GT(scripted[1].cached_tokens, 0) << what << ": the warm run missed the cache";
      expect_same(plain, unscripted[0], what + " unpenalised script");
      EXPECT_GT(unscripted[0].drafted, unscripted[0].accepted) << what;
      expect_same(plain, ngram[0], what + " ngram");
    }
  }
}

// The prefix cache after a request with many rejected drafts holds exactly the blocks (keys,
// tokens, KV bytes) and checkpoints (state bytes) the same request writes without speculation.
TEST_P(SpecDecode, RejectedDraftsLeaveNoTrace) {
  const Model& m = model_of(GetParam());
  std::mt19937 rng(77);
  const auto prompt = tokens_random(rng, 30, m.hparams().n_vocab);
  GenerationRequest req = request_of(prompt, true, 3);
  req.max_tokens = 150;  // enough verifications, now that drafts cross block boundaries
  const int64_t bs = 8;
  struct Snapshot {
    CacheStats stats;
    std::vector<std::vector<float>> blocks, checkpoints;
    Reported run;
  };
  auto snapshot = [&](const EngineConfig& cfg, std::unique_ptr<Drafter> drafter) {
    Engine engine(m, nullptr, cfg, std::move(drafter));
    Reporter runs;
    engine.submit(req, runs.sink(0));
    Snapshot s;
    s.run = runs.wait(0);
    const PrefixCache& cache = engine.prefix_cache();
    s.stats = cache.stats();
    std::vector<int32_t> all = concat(prompt, s.run.ids);
    const size_t bf = static_cast<size_t>(m.kv_block_floats(bs));
    const size_t sf = static_cast<size_t>(m.state_floats());
    for (int64_t n = bs; n <= static_cast<int64_t>(all.size()); n += bs) {
      const PrefixHit hit = cache.lookup(all, req.cache_salt, n);
      if (hit.n_tokens != n) break;
      const float* b = cache.block_data(hit.blocks.back());
      s.blocks.emplace_back(b, b + bf);
      const float* c = cache.checkpoint_data(hit.checkpoint);
      s.checkpoints.emplace_back(c, c + sf);
    }
    return s;
  };
  const Snapshot plain = snapshot(config_plain(1), nullptr);
  const Snapshot spec = snapshot(config_spec(6, 1),
                                 std::make_unique<ScriptDrafter>(
                                     std::vector<std::vector<int32_t>>{script_of(req, plain.run)}));
  expect_same(plain.run, spec.run, GetParam());
  EXPECT_GT(spec.run.drafted - spec.run.accepted, 10) << "too few rejected drafts";
  EXPECT_GT(spec.run.accepted, 10);
  EXPECT_EQ(plain.stats.blocks_indexed, spec.stats.blocks_indexed);
  EXPECT_EQ(plain.stats.checkpoints_resident, spec.stats.checkpoints_resident);
  EXPECT_EQ(plain.stats.bytes_resident, spec.stats.bytes_resident);
  // Every full block of prompt + completion but the last computed one is indexed.
  EXPECT_GE(static_cast<int64_t>(plain.blocks.size()), 10);
  EXPECT_EQ(static_cast<int64_t>(plain.blocks.size()), plain.stats.blocks_indexed);
  ASSERT_EQ(plain.blocks.size(), spec.blocks.size());
  for (size_t i = 0; i < plain.blocks.size(); ++i) {
    EXPECT_TRUE(plain.blocks[i] == spec.blocks[i]) << "KV block " << i << " differs";
    EXPECT_EQ(0, std::memcmp(plain.checkpoints[i].data(), spec.checkpoints[i].data(),
                             plain.checkpoints[i].size() * sizeof(float)))
        << "checkpoint after block " << i << " differs";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, SpecDecode,
                         ::testing::Values("qwen3next-tiny", "qwen35-tiny", "qwen35moe"),
                         [](const auto& info) {
                           std::string n = info.param;
                           return n.substr(0, n.find('-'));
                         });

TEST(NgramDrafts, LatestLongestMatchAndWrap) {
  std::vector<int32_t> out;
  // Suffix "1 2" occurred twice; the latest occurrence is followed by 7.
  ngram_propose(std::vector<int32_t>{1, 2, 5, 1, 2, 7, 9, 1, 2}, 1, 3, 3, out);
  EXPECT_EQ(out, (std::vector<int32_t>{7, 9, 1}));
  // A loop of period 2 wraps onto its own drafts.
  ngram_propose(std::vector<int32_t>{4, 3, 4, 3}, 1, 2, 5, out);
  EXPECT_EQ(out, (std::vector<int32_t>{4, 3, 4, 3, 4}));
  // No earlier occurrence of any suffix: no drafts.
  ngram_propose(std::vector<int32_t>{1, 2, 3}, 1, 3, 4, out);
  EXPECT_TRUE(out.empty());
  // Too short for ngram_min.
  ngram_propose(std::vector<int32_t>{5, 6, 5}, 2, 3, 4, out);
  EXPECT_TRUE(out.empty());
}

TEST(DrafterMake, NamesAndRanges) {
  const Model& m = model_get("qwen35-tiny");
  DrafterConfig c;
  EXPECT_EQ(drafter_make("none", m, c), nullptr);
  EXPECT_EQ(drafter_make("ngram", m, c)->name(), "ngram");
  EXPECT_THROW(drafter_make("mtp", m, c), Error);
  EXPECT_THROW(drafter_make("eagle", m, c), Error);
  c.max_k = 0;
  EXPECT_THROW(drafter_make("ngram", m, c), Error);
  c.max_k = 4;
  c.ngram_min = 3;
  c.ngram_max = 2;
  EXPECT_THROW(drafter_make("ngram", m, c), Error);
  EngineConfig bad = config_base();
  bad.spec = "bogus";
  EXPECT_THROW(Engine(m, nullptr, bad), Error);
}

}  // namespace spec_decode_test
}  // namespace invar::testing_engine
