// `invar bench cache [MODEL]`: what the prefix cache buys. A ~4000-token document shared by two
// tasks with different questions: task 1 runs cold, task 2 right after it (the document served
// from cache); time to first token of each and the ratio. Then prefill throughput of the
// document alone (cache off) under token budgets 64 / 512 / 4096 per step.

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench_clock.h"
#include "bench_registry.h"
#include "core/error.h"
#include "engine/engine.h"
#include "int_list.h"
#include "model/model.h"

namespace invar::app {
namespace {

using Clock = std::chrono::steady_clock;

struct CacheBenchOptions {
  std::string model = "models/default.gguf";
  int64_t doc_tokens = 4000;
  int64_t question_tokens = 24;
  int64_t block_size = 64;
  int threads = 0;
  std::string budgets = "64,512,4096";
};

struct Timed {
  double ttft_s = 0, total_s = 0;
  double cpu_s = 0;  // process CPU time (all threads) from submit to the end of the request
  int64_t cached = 0;
};

// CPU seconds of the whole process: on a shared machine wall time includes waiting for a core,
// CPU time does not, so the table shows both.
// Submits one request and waits for it; ttft = submit → first generated token.
Timed timed_run(Engine& e, const std::vector<int32_t>& prompt, int64_t max_tokens) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Timed t;
  std::string error;
  GenerationRequest r;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  const double cpu0 = cpu_seconds();
  const auto t0 = Clock::now();
  e.submit(r, [&](RequestEvent&& ev) {
    std::lock_guard lk(mu);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (ev.kind == EventKind::token && t.ttft_s == 0) t.ttft_s = s;
    if (ev.kind == EventKind::finished) {
      t.total_s = s;
      t.cached = ev.usage.cached_tokens;
      error = ev.error;
      done = true;
      cv.notify_all();
    }
  });
  std::unique_lock lk(mu);
  cv.wait(lk, [&] { return done; });
  t.cpu_s = cpu_seconds() - cpu0;
  if (!error.empty()) throw Error("bench cache: request failed: " + error);
  return t;
}

int bench_cache_run(const CacheBenchOptions& o) {
  if (!std::filesystem::exists(o.model))
    throw Error("model " + o.model + " not found (make one: invar make-model --out " + o.model +
                ")");
  const auto model = Model::load(o.model);
  const int64_t V = model->hparams().n_vocab;
  std::mt19937 rng(2026);
  auto random_tokens = [&](int64_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t)
      x = static_cast<int32_t>(rng() % static_cast<uint32_t>(std::max<int64_t>(V - 3, 1)));
    return t;
  };
  const auto doc = random_tokens(o.doc_tokens);
  auto task = [&](int64_t) {
    auto p = doc;
    const auto q = random_tokens(o.question_tokens);
    p.insert(p.end(), q.begin(), q.end());
    return p;
  };
  const auto task1 = task(1), task2 = task(2);

  EngineConfig cfg;
  cfg.block_size = o.block_size;
  cfg.threads = o.threads;
  cfg.max_batch_tokens = 512;
  cfg.cache_bytes = 4ll << 30;
  std::printf("invar bench cache: %s, document %lld tokens + %lld-token questions, block %lld\n",
              o.model.c_str(), static_cast<long long>(o.doc_tokens),
              static_cast<long long>(o.question_tokens), static_cast<long long>(o.block_size));
  Timed cold, warm;
  {
    Engine e(*model, nullptr, cfg);
    std::printf("threads %d, budget %lld tokens/step\n\n", e.config().threads,
                static_cast<long long>(cfg.max_batch_tokens));
    cold = timed_run(e, task1, 1);
    warm = timed_run(e, task2, 1);
  }
  std::printf(
      "| run | prompt tokens | cached tokens | TTFT ms | CPU ms |\n|---|---|---|---|---|\n");
  std::printf("| task 1, cold | %zu | %lld | %.1f | %.1f |\n", task1.size(),
              static_cast<long long>(cold.cached), cold.ttft_s * 1e3, cold.cpu_s * 1e3);
  std::printf("| task 2, warm | %zu | %lld | %.1f | %.1f |\n", task2.size(),
              static_cast<long long>(warm.cached), warm.ttft_s * 1e3, warm.cpu_s * 1e3);
  std::printf("\nwarm TTFT is %.1fx faster than cold (target >= 10x); CPU time %.1fx less\n\n",
              cold.ttft_s / warm.ttft_s, cold.cpu_s / warm.cpu_s);

  std::printf(
      "| budget tokens/step | prefill tokens | seconds | CPU s | prefill tok/s |\n"
      "|---|---|---|---|---|\n");
  for (int64_t budget : int_list_parse("--budgets", o.budgets)) {
    EngineConfig c = cfg;
    c.prefix_cache = false;
    c.max_batch_tokens = budget;
    Engine e(*model, nullptr, c);
    const Timed t = timed_run(e, task1, 1);
    std::printf("| %lld | %zu | %.3f | %.3f | %.0f |\n", static_cast<long long>(budget),
                task1.size(), t.ttft_s, t.cpu_s, static_cast<double>(task1.size()) / t.ttft_s);
  }
  return 0;
}

BenchKind bench_cache("cache", [](CLI::App& bench) -> Command::Run {
  auto o = std::make_shared<CacheBenchOptions>();
  auto* s = bench.add_subcommand("cache",
                                 "prefix cache: cold vs warm time to first token; prefill "
                                 "throughput per token budget");
  s->add_option("model", o->model, "GGUF model")->capture_default_str();
  s->add_option("--doc-tokens", o->doc_tokens, "shared document length")->capture_default_str();
  s->add_option("--question-tokens", o->question_tokens, "tokens of each task's question")
      ->capture_default_str();
  s->add_option("--block-size", o->block_size, "KV block / prefix-cache unit")
      ->capture_default_str();
  s->add_option("--threads", o->threads, "compute threads (0: all cores)")->capture_default_str();
  s->add_option("--budgets", o->budgets, "prefill token budgets per step, comma-separated")
      ->capture_default_str();
  return [o] { return bench_cache_run(*o); };
});

}  // namespace
}  // namespace invar::app
