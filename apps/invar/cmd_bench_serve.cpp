// `invar bench serve [--peer llama-server=PATH]`: invar serve (this binary, as a child process)
// and, with --peer, llama-server on the same GGUF, threads, context and parallel slots, each on
// a free loopback port, driven in turn by the same workload (bench_serve_load.h): documents of
// 2-4k tokens as shared prefixes, questions as short tails, streamed, closed-loop at each
// --concurrency and open-loop at --rate. One table row per load and server, the medians over
// --rounds rounds; the machine's FMA peak and read bandwidth before and after, to tell whether
// the machine stayed the same; an SVG plot of throughput and TTFT p99 against concurrency.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "bench_clock.h"
#include "bench_machine.h"
#include "bench_peer.h"
#include "bench_registry.h"
#include "bench_serve_load.h"
#include "bench_svg.h"
#include "core/error.h"
#include "core/simd.h"
#include "fleet_processes.h"
#include "int_list.h"

namespace invar::app {
namespace {

namespace fs = std::filesystem;

struct ServeBenchOptions {
  std::string model = std::string(INVAR_SOURCE_DIR) + "/tests/data/models/qwen3next-tiny.gguf";
  std::string peer;  // "llama-server=PATH"
  int threads = 0;   // compute threads of each server (0: every core)
  int64_t ctx = 0;   // context per request (0: the longest document + question + max tokens)
  int parallel = 0;  // requests computing at once in each server (0: the highest concurrency)
  int documents = 4;
  int questions = 4;
  std::string doc_tokens = "2000,4000";  // each document's length in tokens, [min, max)
  int64_t max_tokens = 32;
  std::string concurrency = "1,4,16";
  double rate = 0;  // open-loop requests/s (0: no open-loop row)
  int rounds = 5;
  bool quick = false;
  std::string sampling = "mixed";
  std::string endpoint = "completions";
  std::string plot;
  std::string work_dir;
  double startup_s = 600;
  std::string simd;         // invar serve --simd (empty: the best the CPU has)
  std::string activations;  // invar serve --activations (empty: its default, f32)
};

struct MachineFigures {
  double fma_gflops = 0, read_gbs = 0;
};

MachineFigures machine_measure(int threads) {
  ThreadPool pool(threads);
  const ProbeBuffer buf(size_t(32) << 20, false);  // 128 MiB: well past the last-level cache
  return {fma_peak_gflops(simd_detect(), pool, wall_seconds),
          read_bandwidth_gbs(buf, pool, wall_seconds)};
}

bool within(double a, double b, double fraction) {
  return std::fabs(a - b) <= fraction * std::max(a, b);
}

// One server under test and its rows' rounds.
struct Side {
  std::string name;
  ChildProcess process;
  int port = 0;
  std::vector<std::vector<RoundSummary>> rounds;  // [load][round]
};

struct Load {
  std::string label;
  int concurrency = 0;  // 0: open loop at the rate
};

void table_print(const std::vector<Load>& loads, const std::vector<Side>& sides,
                 std::vector<std::vector<RoundSummary>>& medians) {
  std::printf(
      "| load | server | gen tok/s | prompt tok/s computed | prompt tok/s cached | TTFT p50 s | "
      "TTFT p99 s | ITL p50 ms | ITL p99 ms | errors |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n");
  medians.assign(sides.size(), {});
  for (size_t l = 0; l < loads.size(); ++l)
    for (size_t s = 0; s < sides.size(); ++s) {
      const RoundSummary m = rounds_median(sides[s].rounds[l]);
      medians[s].push_back(m);
      std::printf("| %s | %s | %.1f | %.1f | %.1f | %.3f | %.3f | %.1f | %.1f | %lld |\n",
                  loads[l].label.c_str(), sides[s].name.c_str(), m.generated_tps, m.computed_tps,
                  m.cached_tps, m.ttft_p50_s, m.ttft_p99_s, 1e3 * m.itl_p50_s, 1e3 * m.itl_p99_s,
                  static_cast<long long>(m.errors));
    }
  if (sides.size() != 2) return;
  // Ratios round by round (each pair ran back to back, so a neighbour's load moves both), then
  // their median and range: steadier than the ratio of the two medians.
  std::printf(
      "\n| load | %s ÷ %s gen tok/s, median (min-max) | TTFT p99 %s ÷ %s, median (min-max) |\n"
      "|---|---|---|\n",
      sides[0].name.c_str(), sides[1].name.c_str(), sides[0].name.c_str(), sides[1].name.c_str());
  for (size_t l = 0; l < loads.size(); ++l) {
    std::vector<double> tps, ttft;
    const size_t n = std::min(sides[0].rounds[l].size(), sides[1].rounds[l].size());
    for (size_t r = 0; r < n; ++r) {
      const RoundSummary &a = sides[0].rounds[l][r], &b = sides[1].rounds[l][r];
      if (b.generated_tps > 0) tps.push_back(a.generated_tps / b.generated_tps);
      if (b.ttft_p99_s > 0) ttft.push_back(a.ttft_p99_s / b.ttft_p99_s);
    }
    const auto cell = [](std::vector<double> v) {
      if (v.empty()) return std::string("-");
      std::sort(v.begin(), v.end());
      const double med =
          v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.2f (%.2f-%.2f)", med, v.front(), v.back());
      return std::string(buf);
    };
    std::printf("| %s | %s | %s |\n", loads[l].label.c_str(), cell(tps).c_str(),
                cell(ttft).c_str());
  }
}

void plot_write(const std::string& path, const std::string& title, const std::vector<Load>& loads,
                const std::vector<Side>& sides,
                const std::vector<std::vector<RoundSummary>>& medians) {
  SvgPanel tps{"aggregate generated tokens/s", "concurrent clients", "tokens/s", {}};
  SvgPanel ttft{"TTFT p99", "concurrent clients", "seconds", {}};
  for (size_t s = 0; s < sides.size(); ++s) {
    SvgSeries a{sides[s].name, {}, {}}, b{sides[s].name, {}, {}};
    for (size_t l = 0; l < loads.size(); ++l) {
      if (loads[l].concurrency == 0) continue;
      a.x.push_back(loads[l].concurrency);
      a.y.push_back(medians[s][l].generated_tps);
      b.x.push_back(loads[l].concurrency);
      b.y.push_back(medians[s][l].ttft_p99_s);
    }
    tps.series.push_back(a);
    ttft.series.push_back(b);
  }
  std::ofstream out(path);
  out << svg_line_charts(title, {tps, ttft});
  if (!out) throw Error("--plot: cannot write " + path);
}

// Sends `requests` again to invar one at a time and compares each answer with the one it gave
// under load (`loaded`); prints the count and returns how many differ (a failed request counts).
int solo_check(int port, const std::vector<LoadRequest>& requests, const RoundResult& loaded,
               const std::string& load) {
  if (requests.empty()) return 0;
  std::fprintf(stderr, "invar: the %s round's %zu requests again, one at a time\n", load.c_str(),
               requests.size());
  const RoundResult solo = load_closed_run(port, requests, 1);
  int differ = 0;
  size_t first = requests.size();
  int64_t lines = 0;  // tokens whose logprobs were compared
  for (size_t i = 0; i < requests.size(); ++i) {
    const RequestResult &a = loaded.requests[i], &b = solo.requests[i];
    lines += std::count(a.output.begin(), a.output.end(), '\n') - 1;
    if (a.ok && b.ok && !a.output.empty() && a.output == b.output) continue;
    ++differ;
    first = std::min(first, i);
  }
  std::printf(
      "invar under load (%s) = alone: %zu of %zu answers identical (text, and %lld "
      "tokens' top logprobs)%s\n",
      load.c_str(), requests.size() - size_t(differ), requests.size(),
      static_cast<long long>(lines), differ ? "" : ", as the contract requires");
  if (differ)
    std::printf("  first difference: request %zu (%s under load, %s alone)\n", first,
                loaded.requests[first].ok ? "ok" : loaded.requests[first].error.c_str(),
                solo.requests[first].ok ? "ok" : solo.requests[first].error.c_str());
  return differ;
}

int serve_bench_run(ServeBenchOptions o) {
  // Everything is checked before any process starts.
  const std::optional<BenchPeer> peer = bench_peer_parse(o.peer, "llama-server");
  if (!fs::exists(o.model)) throw Error("no model file at " + o.model + " (--model)");
  const std::vector<int64_t> levels = int_list_parse("--concurrency", o.concurrency);
  const std::vector<int64_t> range = int_list_parse("--doc-tokens", o.doc_tokens);
  if (range.size() != 2 || range[0] >= range[1])
    throw Error("--doc-tokens: expected MIN,MAX with MIN < MAX, got '" + o.doc_tokens + "'");
  if (o.documents < 1 || o.questions < 1 || o.rounds < 1 || o.max_tokens < 1)
    throw Error("--documents, --questions, --rounds and --max-tokens must be >= 1");
  if (o.sampling != "greedy" && o.sampling != "seeded" && o.sampling != "mixed")
    throw Error("--sampling: '" + o.sampling + "' is not greedy, seeded or mixed");
  if (o.endpoint != "completions" && o.endpoint != "chat")
    throw Error("--endpoint: '" + o.endpoint + "' is not completions or chat");
  if (o.rate < 0) throw Error("--rate: must be >= 0 (0: no open-loop row)");
  if (!o.simd.empty() && !simd_parse(o.simd))
    throw Error("--simd must be off, avx2 or avx512, not '" + o.simd + "'");
  if (!o.activations.empty() && o.activations != "f32" && o.activations != "q8")
    throw Error("--activations must be f32 or q8, not '" + o.activations + "'");
  if (o.threads < 0 || o.parallel < 0 || o.ctx < 0)
    throw Error("--threads, --parallel and --ctx must be >= 0");
  if (!o.plot.empty() && !fs::is_directory(fs::absolute(o.plot).parent_path()))
    throw Error("--plot: no folder for " + o.plot);
  const int threads =
      o.threads ? o.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  const int parallel =
      o.parallel ? o.parallel : int(*std::max_element(levels.begin(), levels.end()));
  // Questions and chat markup stay under 128 tokens.
  const int64_t ctx = o.ctx ? o.ctx : (range[1] + 128 + o.max_tokens + 255) / 256 * 256;

  std::vector<Load> loads;
  for (int64_t c : levels) loads.push_back({"c=" + std::to_string(c), int(c)});
  if (o.rate > 0) {
    char label[32];
    std::snprintf(label, sizeof label, "%.2g req/s", o.rate);
    loads.push_back({label, 0});
  }
  const fs::path root = o.work_dir.empty() ? fs::temp_directory_path() /
                                                 ("invar-bench-serve-" + std::to_string(getpid()))
                                           : fs::path(o.work_dir);
  fs::create_directories(root);
  const std::string cpu = cpu_model_name();
  std::printf(
      "invar bench serve: %s, %d thread(s), context %lld, %d parallel slot(s); %d documents of "
      "%lld-%lld tokens x %d questions, %lld tokens generated each, %s sampling, %s; medians of "
      "%d round(s); CPU %s\n",
      fs::path(o.model).filename().c_str(), threads, static_cast<long long>(ctx), parallel,
      o.documents, static_cast<long long>(range[0]), static_cast<long long>(range[1]), o.questions,
      static_cast<long long>(o.max_tokens), o.sampling.c_str(),
      o.endpoint == "chat" ? "/v1/chat/completions" : "/v1/completions", o.rounds,
      cpu.empty() ? "unknown" : cpu.c_str());
  std::fflush(stdout);
  const MachineFigures before = machine_measure(threads);

  std::vector<Side> sides(peer ? 2 : 1);
  sides[0].name = "invar";
  std::vector<std::string> invar_args = {
      "--model",        o.model,
      "--threads",      std::to_string(threads),
      "--ctx",          std::to_string(ctx),
      "--max-num-seqs", std::to_string(parallel),
      "--queue-limit",  std::to_string(o.documents * o.questions + 16)};
  if (!o.simd.empty()) {
    invar_args.insert(invar_args.end(), {"--simd", o.simd});
    sides[0].name += " --simd " + o.simd;
  }
  if (!o.activations.empty()) {
    invar_args.insert(invar_args.end(), {"--activations", o.activations});
    sides[0].name += " --activations " + o.activations;
  }
  sides[0].port = replica_start(sides[0].process, invar_args, root / "invar.log", o.startup_s);
  if (peer) {
    // llama-server's -c is the context of all slots together; continuous batching and the
    // prompt cache are its defaults (cache_prompt is also sent with each request).
    sides[1].name = "llama-server";
    sides[1].port = server_start(
        sides[1].process,
        {peer->path, "-m", o.model, "-t", std::to_string(threads), "-tb", std::to_string(threads),
         "-c", std::to_string(ctx * parallel), "-np", std::to_string(parallel), "-cb", "--metrics"},
        root / "llama-server.log", o.startup_s);
  }
  for (auto& s : sides) s.rounds.assign(loads.size(), {});
  // The contract under load: invar's last round at the highest closed-loop concurrency is sent
  // again one request at a time, and each answer (text and top logprobs) must be the same.
  size_t busiest = loads.size();
  for (size_t l = 0; l < loads.size(); ++l)
    if (loads[l].concurrency > 0 &&
        (busiest == loads.size() || loads[l].concurrency > loads[busiest].concurrency))
      busiest = l;
  std::vector<LoadRequest> busiest_requests;
  RoundResult busiest_invar;

  WorkloadSpec spec;
  spec.chat = o.endpoint == "chat";
  spec.questions = o.questions;
  spec.max_tokens = o.max_tokens;
  spec.sampling = o.sampling;
  for (size_t l = 0; l < loads.size(); ++l)
    for (int r = 0; r < o.rounds; ++r) {
      // Fresh documents for every load and round, the same for every server: each run starts
      // with its documents uncached, and repeats within it are what the prefix cache serves.
      std::vector<std::string> docs;
      for (int d = 0; d < o.documents; ++d)
        docs.push_back(document_sized(sides[0].port, uint64_t(l) * 100000 + uint64_t(r) * 100 + d,
                                      range[0], range[1]));
      const std::vector<LoadRequest> requests = workload_build(docs, spec);
      for (Side& s : sides) {
        const RoundResult rr = loads[l].concurrency
                                   ? load_closed_run(s.port, requests, loads[l].concurrency)
                                   : load_open_run(s.port, requests, o.rate);
        if (l == busiest && r == o.rounds - 1 && &s == &sides[0]) {
          busiest_requests = requests;
          busiest_invar = rr;
        }
        const RoundSummary sum = round_summarize(rr);
        s.rounds[l].push_back(sum);
        std::fprintf(stderr, "%s round %d/%d %s: %.1f gen tok/s, %lld cached, %lld errors\n",
                     loads[l].label.c_str(), r + 1, o.rounds, s.name.c_str(), sum.generated_tps,
                     static_cast<long long>(sum.cached), static_cast<long long>(sum.errors));
        if (!s.process.running())
          throw Error(s.name + " exited during the run (" +
                      process_exit_text(s.process.exit_status()) + "); its log ends:\n" +
                      s.process.log_text().substr(s.process.log_text().size() > 2000
                                                      ? s.process.log_text().size() - 2000
                                                      : 0));
      }
    }
  const int differ = solo_check(sides[0].port, busiest_requests, busiest_invar,
                                busiest < loads.size() ? loads[busiest].label : "");
  for (auto& s : sides) s.process = ChildProcess();  // stopped before the machine is measured
  const MachineFigures after = machine_measure(threads);

  std::vector<std::vector<RoundSummary>> medians;
  table_print(loads, sides, medians);
  const bool agreed = within(before.fma_gflops, after.fma_gflops, 0.1) &&
                      within(before.read_gbs, after.read_gbs, 0.1);
  std::printf(
      "machine (%d thread(s)): FMA peak %.1f GFLOP/s before, %.1f after; read bandwidth %.1f GB/s "
      "before, %.1f after: %s\n",
      threads, before.fma_gflops, after.fma_gflops, before.read_gbs, after.read_gbs,
      agreed ? "agreed within 10%"
             : "differed by more than 10% (the machine's load changed; compare with care)");
  int failed = 0;
  for (size_t s = 0; s < sides.size(); ++s)
    for (size_t l = 0; l < loads.size(); ++l) {
      const RoundSummary& m = medians[s][l];
      if (!m.first_error.empty())
        std::printf("%s %s first error: %s\n", sides[s].name.c_str(), loads[l].label.c_str(),
                    m.first_error.c_str());
      failed += m.errors > 0 || !(m.generated_tps > 0);
    }
  if (!o.plot.empty()) {
    plot_write(o.plot,
               "invar bench serve: " + fs::path(o.model).filename().string() + ", " +
                   std::to_string(threads) + " thread(s)" + (cpu.empty() ? "" : ", " + cpu),
               loads, sides, medians);
    std::printf("plot: %s\n", o.plot.c_str());
  }
  if (o.work_dir.empty()) fs::remove_all(root);
  return failed == 0 && differ == 0 ? 0 : 1;
}

BenchKind serve_bench("serve", [](CLI::App& bench) -> Command::Run {
  auto o = std::make_shared<ServeBenchOptions>();
  auto* s = bench.add_subcommand(
      "serve",
      "invar serve next to llama-server (--peer) under the same streamed load: tok/s, prompt "
      "tokens computed vs cached, TTFT and inter-token percentiles per concurrency");
  s->footer(
      "Each round sends D x Q requests (request i: question i / D on document i % D, so each "
      "document's first question is computed and the rest can be served from the prefix cache). "
      "Every load and round has new documents, the same for both servers; rounds alternate "
      "invar, llama-server. Rows are medians over the rounds. ITL: time between consecutive "
      "streamed chunks with text. Exit status 1 when a request failed.");
  s->add_option("--model", o->model, "GGUF both servers load")->capture_default_str();
  s->add_option("--peer", o->peer,
                "llama-server=PATH: start that llama-server too (-m, -t, -tb, -c context x "
                "slots, -np, -cb, --metrics) and bench it in turn; without it, invar alone");
  s->add_option("--threads", o->threads, "compute threads of each server (0: every core)")
      ->capture_default_str();
  s->add_option("--ctx", o->ctx,
                "context per request (0: the longest document + 128 + --max-tokens, rounded up "
                "to 256)")
      ->capture_default_str();
  s->add_option("--parallel", o->parallel,
                "requests each server computes at once: invar --max-num-seqs, llama-server -np "
                "(0: the highest --concurrency)")
      ->capture_default_str();
  s->add_option("--documents", o->documents, "D: documents per round (shared prefixes)")
      ->capture_default_str();
  s->add_option("--questions", o->questions, "Q: questions per document (short tails)")
      ->capture_default_str();
  s->add_option("--doc-tokens", o->doc_tokens,
                "MIN,MAX: each document's length in tokens, counted by invar's /tokenize")
      ->capture_default_str();
  s->add_option("--max-tokens", o->max_tokens, "tokens generated per request (EOS ignored)")
      ->capture_default_str();
  s->add_option("--concurrency", o->concurrency,
                "closed-loop clients, one row each (comma-separated)")
      ->capture_default_str();
  s->add_option("--rate", o->rate,
                "open-loop row: requests/s sent on a fixed schedule, whatever is in flight (0: "
                "none)")
      ->capture_default_str();
  s->add_option("--rounds", o->rounds, "rounds per load and server; rows are their medians")
      ->capture_default_str();
  s->add_option("--simd", o->simd,
                "off | avx2 | avx512: invar serve's SIMD level (an AVX2 stand-in on an AVX-512 "
                "machine; llama-server keeps its build's); default the best the CPU has");
  s->add_option("--activations", o->activations,
                "f32 | q8: invar serve's numerics profile (docs/numerics.md); default f32");
  s->add_flag("--quick", o->quick,
              "small run: 2 documents of 256-512 tokens x 3 questions, 8 tokens, 2 rounds "
              "(flags given explicitly still win)");
  s->add_option("--sampling", o->sampling,
                "greedy (temperature 0), seeded (temperature 0.8, top_p 0.95, a seed per "
                "request) or mixed (alternating by question)")
      ->capture_default_str();
  s->add_option("--endpoint", o->endpoint,
                "completions (/v1/completions) or chat (/v1/chat/completions, the model's "
                "template)")
      ->capture_default_str();
  s->add_option("--plot", o->plot,
                "write an SVG: throughput and TTFT p99 against concurrency, per server");
  s->add_option("--work-dir", o->work_dir, "keep the servers' logs here");
  s->add_option("--startup-timeout", o->startup_s, "seconds each server may take to load")
      ->capture_default_str();
  return [o, s]() {
    ServeBenchOptions run = *o;
    if (run.quick) {
      if (s->count("--documents") == 0) run.documents = 2;
      if (s->count("--questions") == 0) run.questions = 3;
      if (s->count("--doc-tokens") == 0) run.doc_tokens = "256,512";
      if (s->count("--max-tokens") == 0) run.max_tokens = 8;
      if (s->count("--rounds") == 0) run.rounds = 2;
    }
    return serve_bench_run(run);
  };
});

}  // namespace
}  // namespace invar::app
