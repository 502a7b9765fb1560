// `invar bench tokenizer`: tokenizer throughput on one core (encode, decode, streaming).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "bench_clock.h"
#include "bench_registry.h"
#include "core/error.h"
#include "core/file_read.h"
#include "tokenizer/tokenizer.h"

namespace invar::app {
namespace {

struct TokBenchArgs {
  std::string tokenizer = std::string(INVAR_SOURCE_DIR) + "/data/qwen3/tokenizer.json";
  std::string text =
      std::string(INVAR_SOURCE_DIR) + "/tests/data/seed/prefix-cache-changed-the-answer.txt";
  int repeat = 100;
  int runs = 3;
};

// Best of `runs` timings of fn().
template <class F>
double best_of(int runs, F&& fn) {
  double best = 1e30;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

int run_bench(const TokBenchArgs& a) {
  const std::string one = file_read(a.text, "--text");
  std::string text;
  text.reserve(one.size() * static_cast<size_t>(a.repeat));
  for (int i = 0; i < a.repeat; ++i) text += one;

  const auto t0 = std::chrono::steady_clock::now();
  const auto tok = Tokenizer::from_file(a.tokenizer);
  const double load_s = seconds_since(t0);

  std::vector<int32_t> ids;
  const double enc_s = best_of(a.runs, [&] { ids = tok->encode(text, false); });
  std::string back;
  const double dec_s = best_of(a.runs, [&] { back = tok->decode(ids); });
  size_t streamed = 0;
  const double stream_s = best_of(a.runs, [&] {
    StreamDecoder sd(*tok);
    streamed = 0;
    for (int32_t id : ids) streamed += sd.push(id).size();
    streamed += sd.flush().size();
  });
  if (back != text || streamed != text.size()) throw Error("bench: decode did not round-trip");

  const double mb = static_cast<double>(text.size()) / 1e6;
  const double nt = static_cast<double>(ids.size());
  std::printf("tokenizer: %s (%lld tokens, load %.2f s)\n", a.tokenizer.c_str(),
              static_cast<long long>(tok->n_vocab()), load_s);
  std::printf("text: %s x%d = %.2f MB, %zu tokens (%.2f bytes/token); one thread, best of %d\n\n",
              a.text.c_str(), a.repeat, mb, ids.size(), static_cast<double>(text.size()) / nt,
              a.runs);
  std::printf("%-8s %10s %14s %10s\n", "phase", "seconds", "tokens/s", "MB/s");
  std::printf("%-8s %10.4f %14.0f %10.1f\n", "encode", enc_s, nt / enc_s, mb / enc_s);
  std::printf("%-8s %10.4f %14.0f %10.1f\n", "decode", dec_s, nt / dec_s, mb / dec_s);
  std::printf("%-8s %10.4f %14.0f %10.1f\n", "stream", stream_s, nt / stream_s, mb / stream_s);
  return 0;
}

BenchKind tokenizer_bench("tokenizer", [](CLI::App& bench) -> Command::Run {
  auto a = std::make_shared<TokBenchArgs>();
  auto* sub = bench.add_subcommand(
      "tokenizer",
      "Tokenizer throughput: encode / decode / streaming decode of a text repeated N\n"
      "times (default: the seed write-up x100 with the Qwen3 vocabulary), one thread");
  sub->add_option("--tokenizer", a->tokenizer, "tokenizer.json or MODEL.gguf")
      ->capture_default_str();
  sub->add_option("--text", a->text, "text file")->capture_default_str();
  sub->add_option("--repeat", a->repeat, "times the text is repeated")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--runs", a->runs, "timed runs; the best is reported")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  return [a]() -> int { return run_bench(*a); };
});

}  // namespace
}  // namespace invar::app
