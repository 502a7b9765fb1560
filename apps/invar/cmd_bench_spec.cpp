// `invar bench spec [MODEL]`: what speculative decoding buys on a generated (or given) model.
//   1. Verification cost: one forward pass over 1 + k rows (all logits, a rollback checkpoint
//      per draft, as the engine runs it) against one decode step, k = 1..8, per thread count.
//      Decode is bandwidth-bound, so k + 1 rows should cost far less than k + 1 steps.
//   2. Projected speed-up: with each draft right with probability a, a verification emits
//      (1 − a^(k+1)) / (1 − a) tokens on average; divided by its cost ratio, for a = 0.6, 0.8.
//   3. Engine decode tokens/s, interleaved runs of one request: spec off; n-gram drafts on a
//      prompt whose text repeats; and drafts right with probability 0.6 / 0.8 (a drafter that
//      knows plain decoding's answer and spoils drafts at random), which measures what (2)
//      projects. The MTP drafter gets its column where the model can serve it.
//   4. MTP acceptance cold vs warm, many questions over one document: each question alone in a
//      fresh engine (cold) against all of them in one engine, where every question after the
//      first hits the document's blocks (warm). The hidden rows the MTP head reads come back
//      with the blocks (cache/block_hidden.h), so warm should accept what cold accepts.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "bench_registry.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/drafter_make.h"
#include "engine/engine.h"
#include "forge/make_model.h"
#include "int_list.h"
#include "model/model.h"

namespace invar::app {
namespace {

using Clock = std::chrono::steady_clock;

struct SpecBenchOptions {
  std::string model;  // empty: generate
  int64_t embd = 512, layers = 8, vocab = 32768;
  int64_t prompt = 64, decode = 64, k = 4;
  std::string mtp = "none";  // generated model's MTP block: none, random, bigram
  int64_t questions = 4;     // cold vs warm: questions over one document of `prompt` tokens
  std::string threads = "1,2";
  int reps = 5;
};

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string model_generate(const SpecBenchOptions& o) {
  MakeModelConfig c;
  c.arch = Arch::qwen3next;
  c.name = "invar-bench-spec";
  c.n_embd = o.embd;
  c.n_layer = o.layers;
  c.n_head = 8;
  c.n_head_kv = 2;
  c.head_dim = 64;
  c.n_rot = 16;
  c.n_ff = 2 * o.embd;
  c.n_ff_exp = o.embd / 2;
  c.n_ff_shexp = o.embd;
  c.ssm_state = 64;
  c.ssm_groups = 4;
  c.ssm_v_heads = 8;
  if (o.mtp == "random")
    c.mtp = MtpKind::random;
  else if (o.mtp == "bigram")
    c.mtp = MtpKind::bigram;
  else if (o.mtp != "none")
    throw Error("--mtp must be none, random or bigram");
  make_model_validate(c, o.vocab);
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("invar-bench-spec-" + std::to_string(getpid()) + ".gguf"))
                               .string();
  GgufWriter w;
  make_model(c, o.vocab, w);
  w.write(path);
  return path;
}

// One sequence's state and KV after a prompt, and forward passes of n rows at its end that
// leave it as it was (the state is restored from a copy, outside the timing).
class VerifyTimer {
 public:
  VerifyTimer(const Model& m, int threads, const std::vector<int32_t>& prompt, int64_t max_rows)
      : m_(m), pool_(threads), scratch_(m.scratch_make(std::max<int64_t>(max_rows, 64), 1)) {
    const int64_t bs = 64;
    const int64_t n_blocks = (static_cast<int64_t>(prompt.size()) + max_rows) / bs + 1;
    kv_.resize(static_cast<size_t>(n_blocks));
    for (auto& b : kv_) {
      b.assign(static_cast<size_t>(m.kv_block_floats(bs)), 0.0f);
      blocks_.push_back(b.data());
    }
    state_.assign(static_cast<size_t>(m.state_floats()), 0.0f);
    rollback_.resize(static_cast<size_t>(max_rows * m.state_floats()));
    logits_.resize(static_cast<size_t>(max_rows * m.hparams().n_vocab));
    tokens_ = prompt;
    tokens_.resize(prompt.size() + static_cast<size_t>(max_rows), 1);
    for (size_t i = 0; i < prompt.size(); i += 64)
      pass(static_cast<int64_t>(i), std::min<int64_t>(64, static_cast<int64_t>(prompt.size() - i)),
           false);
    saved_ = state_;
    pos_ = static_cast<int64_t>(prompt.size());
  }

  // Seconds of one forward pass over n rows at the end of the prompt.
  double time_rows(int64_t n) {
    state_ = saved_;
    const auto t0 = Clock::now();
    pass(pos_, n, true);
    return since(t0);
  }

 private:
  void pass(int64_t pos0, int64_t n, bool verify) {
    SeqChunk c;
    c.tokens = tokens_.data() + pos0;
    c.n_tokens = n;
    c.pos0 = pos0;
    c.state = state_.data();
    c.kv_blocks = blocks_.data();
    c.block_size = 64;
    ck_pos_.clear();
    ck_dst_.clear();
    for (int64_t j = 1; verify && j < n; ++j) {
      ck_pos_.push_back(pos0 + j);
      ck_dst_.push_back(rollback_.data() + (j - 1) * m_.state_floats());
    }
    c.checkpoint_pos = ck_pos_.data();
    c.checkpoint_dst = ck_dst_.data();
    c.n_checkpoints = static_cast<int64_t>(ck_pos_.size());
    c.all_logits = verify;
    c.logits = logits_.data();
    m_.forward({&c, 1}, *scratch_, pool_);
  }

  const Model& m_;
  ThreadPool pool_;
  ForwardScratchPtr scratch_;
  std::vector<std::vector<float>> kv_;
  std::vector<float*> blocks_;
  std::vector<float> state_, saved_, rollback_, logits_;
  std::vector<int32_t> tokens_;
  std::vector<int64_t> ck_pos_;
  std::vector<float*> ck_dst_;
  int64_t pos_ = 0;
};

// Knows the request's plain answer; each draft is right with probability `rate` (a hash of its
// position, so every run drafts the same).
class OracleDrafter : public Drafter {
 public:
  OracleDrafter(std::vector<int32_t> answer, double rate, int64_t n_vocab)
      : answer_(std::move(answer)), rate_(rate), n_vocab_(n_vocab) {}
  std::string_view name() const override { return "oracle"; }
  std::unique_ptr<DraftSeq> seq_make(std::span<const int32_t>) override {
    return std::make_unique<DraftSeq>();
  }
  void propose(std::span<DraftJob> jobs, ThreadPool&) override {
    for (DraftJob& j : jobs)
      for (int64_t i = 0; i < j.max_k; ++i) {
        const size_t at = j.tokens.size() + static_cast<size_t>(i);
        if (at >= answer_.size()) break;
        uint64_t h = at * 0x9e3779b97f4a7c15ull + j.tokens.size();  // splitmix64 finaliser
        h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
        h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
        h ^= h >> 31;
        const bool right = static_cast<double>(h % 10000) < rate_ * 10000;
        j.out->push_back(right ? answer_[at] : static_cast<int32_t>((answer_[at] + 1) % n_vocab_));
      }
  }

 private:
  std::vector<int32_t> answer_;
  double rate_;
  int64_t n_vocab_;
};

struct SpecRun {
  std::vector<int32_t> tokens;  // prompt + completion
  double tok_s = 0;
  int64_t drafted = 0, accepted = 0;
  int64_t cached = 0;  // prompt tokens served from the prefix cache
};

// One request in engine e, waited for.
SpecRun decode_in(Engine& e, const std::vector<int32_t>& prompt, int64_t n) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  SpecRun d;
  d.tokens = prompt;
  std::string error;
  Clock::time_point first;
  GenerationRequest r;
  r.prompt = prompt;
  r.max_tokens = n;
  e.submit(r, [&](RequestEvent&& ev) {
    std::lock_guard lk(mu);
    if (ev.kind == EventKind::token) {
      if (d.tokens.size() == prompt.size()) first = Clock::now();
      d.tokens.push_back(ev.token);
    }
    if (ev.kind == EventKind::finished) {
      d.tok_s = static_cast<double>(ev.usage.completion_tokens - 1) / since(first);
      d.drafted = ev.usage.draft_tokens;
      d.accepted = ev.usage.accepted_draft_tokens;
      d.cached = ev.usage.cached_tokens;
      error = ev.error;
      done = true;
      cv.notify_all();
    }
  });
  std::unique_lock lk(mu);
  cv.wait(lk, [&] { return done; });
  if (!error.empty()) throw Error("bench spec: request failed: " + error);
  return d;
}

SpecRun decode_run(const Model& m, const EngineConfig& cfg, std::unique_ptr<Drafter> drafter,
                   const std::vector<int32_t>& prompt, int64_t n) {
  Engine e(m, nullptr, cfg, std::move(drafter));
  return decode_in(e, prompt, n);
}

void verify_cost_table(const Model& m, const std::vector<int32_t>& prompt,
                       const std::vector<int64_t>& threads, int reps) {
  std::printf("\n## Verification cost: one pass over k+1 rows / one decode step (median of %d)\n\n",
              reps);
  std::printf("| threads | step ms |");
  for (int64_t k = 1; k <= 8; ++k) std::printf(" k=%lld |", static_cast<long long>(k));
  std::printf(" best k at a=0.6 | best k at a=0.8 |\n|---|---|");
  for (int i = 0; i < 10; ++i) std::printf("---|");
  std::printf("\n");
  for (int64_t t : threads) {
    VerifyTimer vt(m, static_cast<int>(t), prompt, 9);
    std::vector<std::vector<double>> s(10);
    for (int r = 0; r < reps + 1; ++r)  // the first round warms up
      for (int64_t n = 1; n <= 9; ++n) {
        const double x = vt.time_rows(n);
        if (r > 0) s[static_cast<size_t>(n)].push_back(x);
      }
    const double one = median(s[1]);
    std::printf("| %lld | %.2f |", static_cast<long long>(t), one * 1e3);
    std::vector<double> ratio(9);
    for (int64_t k = 1; k <= 8; ++k) {
      ratio[static_cast<size_t>(k)] = median(s[static_cast<size_t>(k + 1)]) / one;
      std::printf(" %.2fx |", ratio[static_cast<size_t>(k)]);
    }
    for (double a : {0.6, 0.8}) {
      int64_t best = 1;
      double best_up = 0;
      for (int64_t k = 1; k <= 8; ++k) {
        double ak = 1;
        for (int64_t i = 0; i <= k; ++i) ak *= a;
        const double up = (1 - ak) / (1 - a) / ratio[static_cast<size_t>(k)];
        if (up > best_up) best_up = up, best = k;
      }
      std::printf(" k=%lld: %.2fx |", static_cast<long long>(best), best_up);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  std::printf(
      "\nk=N: pass over N+1 rows relative to one decode step. best k: the k with the highest "
      "projected speed-up (1 - a^(k+1)) / (1 - a) / cost ratio, per-draft acceptance a.\n");
}

void decode_table(const Model& m, const SpecBenchOptions& o, const std::vector<int64_t>& threads) {
  std::mt19937 rng(7);
  const int64_t V = m.hparams().n_vocab;
  std::vector<int32_t> unit(16);
  for (auto& x : unit) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(V));
  std::vector<int32_t> prompt;
  while (static_cast<int64_t>(prompt.size()) < o.prompt)
    prompt.insert(prompt.end(), unit.begin(), unit.end());
  std::printf(
      "\n## Engine decode, one request: prompt %lld tokens (a 16-token unit repeated), %lld "
      "tokens, k=%lld, median of %d interleaved runs\n\n",
      static_cast<long long>(prompt.size()), static_cast<long long>(o.decode),
      static_cast<long long>(o.k), o.reps);
  std::printf("| threads | drafter | tok/s | vs off | drafted | accepted | acceptance |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (int64_t t : threads) {
    EngineConfig cfg;
    cfg.threads = static_cast<int>(t);
    cfg.draft.max_k = o.k;
    cfg.prefix_cache = false;
    const SpecRun plain = decode_run(m, cfg, nullptr, prompt, o.decode);
    struct Arm {
      std::string name;
      std::function<std::unique_ptr<Drafter>()> make;
      std::vector<double> tok_s;
      SpecRun last;
    };
    std::vector<Arm> arms;
    arms.push_back({"off", [] { return std::unique_ptr<Drafter>(); }, {}, {}});
    arms.push_back({"ngram", [&] { return drafter_make("ngram", m, cfg.draft); }, {}, {}});
    std::string mtp_why;
    try {
      drafter_make("mtp", m, cfg.draft);
      arms.push_back({"mtp", [&] { return drafter_make("mtp", m, cfg.draft); }, {}, {}});
    } catch (const Error& e) {
      mtp_why = e.what();
    }
    for (double a : {0.6, 0.8})
      arms.push_back({"right w.p. " + std::to_string(a).substr(0, 3),
                      [&, a] { return std::make_unique<OracleDrafter>(plain.tokens, a, V); },
                      {},
                      {}});
    for (int r = 0; r < o.reps; ++r)
      for (Arm& arm : arms) {
        arm.last = decode_run(m, cfg, arm.make(), prompt, o.decode);
        if (arm.last.tokens != plain.tokens)
          throw Error("bench spec: " + arm.name + " changed the answer (a bug)");
        arm.tok_s.push_back(arm.last.tok_s);
      }
    const double off = median(arms[0].tok_s);
    for (const Arm& arm : arms) {
      const double v = median(arm.tok_s);
      std::printf("| %lld | %s | %.1f | %.2fx | %lld | %lld | %s |\n", static_cast<long long>(t),
                  arm.name.c_str(), v, v / off, static_cast<long long>(arm.last.drafted),
                  static_cast<long long>(arm.last.accepted),
                  arm.last.drafted ? (std::to_string(static_cast<double>(arm.last.accepted) /
                                                     static_cast<double>(arm.last.drafted))
                                          .substr(0, 4))
                                         .c_str()
                                   : "-");
    }
    if (!mtp_why.empty())
      std::printf("| %lld | mtp | n/a: %s |||||\n", static_cast<long long>(t), mtp_why.c_str());
    std::fflush(stdout);
  }
}

std::string acceptance(int64_t accepted, int64_t drafted) {
  return drafted ? std::to_string(static_cast<double>(accepted) / static_cast<double>(drafted))
                       .substr(0, 5)
                 : "-";
}

void mtp_warm_table(const Model& m, const SpecBenchOptions& o,
                    const std::vector<int64_t>& threads) {
  EngineConfig cfg;
  cfg.threads = static_cast<int>(threads.front());
  cfg.draft.max_k = o.k;
  std::printf(
      "\n## MTP acceptance cold vs warm: %lld questions of 16 tokens over one document "
      "of %lld tokens, %lld tokens each, k=%lld, %lld threads\n\n",
      static_cast<long long>(o.questions), static_cast<long long>(o.prompt),
      static_cast<long long>(o.decode), static_cast<long long>(o.k),
      static_cast<long long>(cfg.threads));
  try {
    drafter_make("mtp", m, cfg.draft);
  } catch (const Error& e) {
    std::printf("n/a: %s\n", e.what());
    return;
  }
  std::mt19937 rng(11);
  const auto V = static_cast<uint32_t>(m.hparams().n_vocab);
  std::vector<int32_t> doc(static_cast<size_t>(o.prompt));
  for (auto& x : doc) x = static_cast<int32_t>(rng() % V);
  std::printf(
      "| question | cold drafted | cold accepted | cold acceptance | warm cached | "
      "warm drafted | warm accepted | warm acceptance |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  Engine warm(m, nullptr, cfg, drafter_make("mtp", m, cfg.draft));
  SpecRun cold_all, warm_all;
  for (int64_t q = 0; q < o.questions; ++q) {
    std::vector<int32_t> prompt = doc;
    for (int i = 0; i < 16; ++i) prompt.push_back(static_cast<int32_t>(rng() % V));
    const SpecRun c = decode_run(m, cfg, drafter_make("mtp", m, cfg.draft), prompt, o.decode);
    const SpecRun w = decode_in(warm, prompt, o.decode);
    if (c.tokens != w.tokens) throw Error("bench spec: a cache hit changed the answer (a bug)");
    std::printf("| %lld | %lld | %lld | %s | %lld | %lld | %lld | %s |\n",
                static_cast<long long>(q + 1), static_cast<long long>(c.drafted),
                static_cast<long long>(c.accepted), acceptance(c.accepted, c.drafted).c_str(),
                static_cast<long long>(w.cached), static_cast<long long>(w.drafted),
                static_cast<long long>(w.accepted), acceptance(w.accepted, w.drafted).c_str());
    if (q == 0) continue;  // the first question is cold in both engines
    cold_all.drafted += c.drafted, cold_all.accepted += c.accepted;
    warm_all.drafted += w.drafted, warm_all.accepted += w.accepted;
  }
  std::printf("\nquestions 2..%lld: acceptance cold %s, warm %s\n",
              static_cast<long long>(o.questions),
              acceptance(cold_all.accepted, cold_all.drafted).c_str(),
              acceptance(warm_all.accepted, warm_all.drafted).c_str());
  std::fflush(stdout);
}

int bench_spec_run(const SpecBenchOptions& o) {
  if (o.reps < 1) throw Error("--reps must be ≥ 1");
  if (o.k < 1 || o.k > 64) throw Error("--k must be in 1..64");
  if (o.prompt < 1 || o.decode < 2) throw Error("--prompt ≥ 1 and --decode ≥ 2");
  if (o.questions < 1) throw Error("--questions must be ≥ 1");
  const auto threads = int_list_parse("--threads", o.threads);
  std::string path = o.model;
  const bool generated = path.empty();
  if (generated) {
    std::fprintf(stderr, "bench spec: generating the model\n");
    path = model_generate(o);
  }
  struct Cleanup {
    std::string p;
    bool on;
    ~Cleanup() {
      if (on) std::filesystem::remove(p);
    }
  } cleanup{path, generated};
  const auto model = Model::load(path);
  const Hparams& hp = model->hparams();
  std::printf("invar bench spec: %s%s E=%lld L=%lld V=%lld, file %.0f MB\n",
              generated ? "generated " : "", std::string(arch_name(hp.arch)).c_str(),
              static_cast<long long>(hp.n_embd), static_cast<long long>(hp.n_layer),
              static_cast<long long>(hp.n_vocab), double(model->gguf().file_size()) / 1e6);
  std::mt19937 rng(3);
  std::vector<int32_t> prompt(static_cast<size_t>(o.prompt));
  for (auto& x : prompt) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(hp.n_vocab));
  verify_cost_table(*model, prompt, threads, o.reps * 4);
  decode_table(*model, o, threads);
  mtp_warm_table(*model, o, threads);
  return 0;
}

BenchKind bench_spec("spec", [](CLI::App& bench) -> Command::Run {
  auto o = std::make_shared<SpecBenchOptions>();
  auto* s = bench.add_subcommand(
      "spec",
      "speculative decoding: cost of verifying k+1 rows vs one decode step, projected and "
      "measured speed-up, n-gram drafts on repeating text");
  s->add_option("model", o->model, "GGUF model (default: generate a qwen3next)");
  s->add_option("--embd", o->embd, "generated model: hidden size")->capture_default_str();
  s->add_option("--layers", o->layers, "generated model: layers")->capture_default_str();
  s->add_option("--vocab", o->vocab, "generated model: vocabulary size")->capture_default_str();
  s->add_option("--prompt", o->prompt, "prompt tokens")->capture_default_str();
  s->add_option("--decode", o->decode, "tokens generated per engine run")->capture_default_str();
  s->add_option("--k", o->k, "drafts per step in the engine runs")->capture_default_str();
  s->add_option("--mtp", o->mtp, "generated model: MTP block none, random or bigram")
      ->capture_default_str();
  s->add_option("--questions", o->questions, "cold vs warm: questions over one document")
      ->capture_default_str();
  s->add_option("--threads", o->threads, "thread counts, comma-separated")->capture_default_str();
  s->add_option("--reps", o->reps, "engine runs per drafter (interleaved)")->capture_default_str();
  return [o] { return bench_spec_run(*o); };
});

}  // namespace
}  // namespace invar::app
