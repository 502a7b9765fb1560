// `invar bench server`: a load run against the OpenAI server — N concurrent streaming clients
// for a fixed time (default 32 for 120 s) on the tiny model. Prints requests/s, tokens/s,
// latency and time-to-first-token percentiles, errors, and the server's RSS over the run.
// Without --url it starts the server in this process on a free loopback port, so the RSS read
// from /proc/self is the server's (plus the small clients).
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench_clock.h"
#include "bench_registry.h"
#include "core/error.h"
#include "server/http_server.h"

namespace invar::app {
namespace {

using Clock = std::chrono::steady_clock;

struct ServerBenchOptions {
  std::string model = std::string(INVAR_SOURCE_DIR) + "/tests/data/models/qwen3next-tiny.gguf";
  std::string url;  // "" → in-process server
  double duration_s = 120;
  int concurrency = 32;
  int64_t max_tokens = 32;
  int documents = 8;  // distinct prompts, so some requests hit the prefix cache
  int threads = 0;
};

struct ClientStats {
  std::vector<double> latency_s, ttft_s;
  int64_t ok = 0, errors = 0, tokens = 0;
  std::string first_error;
};

int64_t rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
  return 0;
}

std::string document(int i) {
  std::string s = "Document " + std::to_string(i) + ":";
  for (int k = 0; k < 40; ++k) s += " item " + std::to_string((i * 7 + k) % 53);
  return s;
}

void client_loop(const std::string& host, int port, const ServerBenchOptions& o, int index,
                 Clock::time_point end, ClientStats& st) {
  httplib::Client cli(host, port);
  cli.set_read_timeout(60, 0);
  for (int n = 0; Clock::now() < end; ++n) {
    nlohmann::json body = {
        {"prompt", document((index + n) % o.documents) + " Question " + std::to_string(n)},
        {"max_tokens", o.max_tokens},
        {"temperature", 0},
        {"ignore_eos", true},
        {"stream", true}};
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    auto t0 = Clock::now();
    double ttft = -1;
    std::string received;
    req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
      if (ttft < 0) ttft = std::chrono::duration<double>(Clock::now() - t0).count();
      received.append(data, len);
      return true;
    };
    auto res = cli.send(req);
    double lat = std::chrono::duration<double>(Clock::now() - t0).count();
    bool ok = res && res->status == 200 && received.find("data: [DONE]") != std::string::npos;
    if (!ok) {
      st.errors++;
      if (st.first_error.empty())
        st.first_error = res ? "HTTP " + std::to_string(res->status) + " " + received.substr(0, 200)
                             : "connection error " + httplib::to_string(res.error());
      continue;
    }
    st.ok++;
    st.latency_s.push_back(lat);
    st.ttft_s.push_back(ttft);
    for (size_t p = received.find("\"text\":"); p != std::string::npos;
         p = received.find("\"text\":", p + 1))
      st.tokens++;
  }
}

int run_server_bench(const ServerBenchOptions& o) {
  std::string host = "127.0.0.1";
  int port = 0;
  std::unique_ptr<server::HttpServer> srv;
  if (o.url.empty()) {
    if (!std::filesystem::exists(o.model))
      throw Error("no model file at " + o.model + " (--model)");
    server::ServerConfig cfg;
    cfg.port = 0;
    cfg.queue_limit = o.concurrency * 2;
    EngineConfig ecfg;
    ecfg.threads = o.threads;
    std::string path = o.model;
    srv = std::make_unique<server::HttpServer>(
        cfg, [path, ecfg] { return server::engine_backend_load(path, ecfg); });
    port = srv->bind();
    srv->start();
    std::string err;
    if (!srv->wait_loaded(&err)) throw Error("cannot load " + o.model + ": " + err);
  } else {
    auto colon = o.url.rfind(':');
    auto scheme = o.url.find("://");
    if (colon == std::string::npos || scheme == std::string::npos || colon < scheme + 3)
      throw Error("--url must look like http://HOST:PORT");
    host = o.url.substr(scheme + 3, colon - scheme - 3);
    port = std::atoi(o.url.c_str() + colon + 1);
  }

  int64_t rss0 = rss_kib(), rss_max = rss0;
  auto start = Clock::now();
  auto end = start + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(o.duration_s));
  std::vector<ClientStats> stats(size_t(o.concurrency));
  std::vector<std::thread> clients;
  for (int i = 0; i < o.concurrency; ++i)
    clients.emplace_back(client_loop, host, port, std::cref(o), i, end, std::ref(stats[size_t(i)]));
  std::vector<int64_t> rss_trace;
  while (Clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    int64_t r = rss_kib();
    rss_max = std::max(rss_max, r);
    rss_trace.push_back(r);
  }
  for (auto& t : clients) t.join();
  double wall = std::chrono::duration<double>(Clock::now() - start).count();

  ClientStats all;
  for (auto& s : stats) {
    all.ok += s.ok;
    all.errors += s.errors;
    all.tokens += s.tokens;
    all.latency_s.insert(all.latency_s.end(), s.latency_s.begin(), s.latency_s.end());
    all.ttft_s.insert(all.ttft_s.end(), s.ttft_s.begin(), s.ttft_s.end());
    if (all.first_error.empty()) all.first_error = s.first_error;
  }
  // RSS growth over the second half of the run: a leak shows as a steady climb there.
  int64_t rss_mid = rss_trace.empty() ? rss0 : rss_trace[rss_trace.size() / 2];
  int64_t rss_end = rss_trace.empty() ? rss0 : rss_trace.back();
  std::printf("invar bench server: %d concurrent streams, %.0f s, max_tokens %lld, %s\n",
              o.concurrency, wall, static_cast<long long>(o.max_tokens),
              o.url.empty() ? o.model.c_str() : o.url.c_str());
  std::printf("  requests ok %lld, errors %lld, %.2f requests/s, %.1f streamed chunks/s\n",
              static_cast<long long>(all.ok), static_cast<long long>(all.errors),
              double(all.ok) / wall, double(all.tokens) / wall);
  std::printf("  latency  s: p50 %.3f  p90 %.3f  p99 %.3f  max %.3f\n",
              percentile(all.latency_s, 0.5), percentile(all.latency_s, 0.9),
              percentile(all.latency_s, 0.99), percentile(all.latency_s, 1));
  std::printf("  ttft     s: p50 %.3f  p90 %.3f  p99 %.3f  max %.3f\n", percentile(all.ttft_s, 0.5),
              percentile(all.ttft_s, 0.9), percentile(all.ttft_s, 0.99), percentile(all.ttft_s, 1));
  if (o.url.empty())
    std::printf("  RSS MiB: start %.1f  mid %.1f  end %.1f  max %.1f\n", rss0 / 1024.0,
                rss_mid / 1024.0, rss_end / 1024.0, rss_max / 1024.0);
  if (!all.first_error.empty()) std::printf("  first error: %s\n", all.first_error.c_str());
  if (srv) srv->shutdown(10);
  return all.errors == 0 && all.ok > 0 ? 0 : 1;
}

BenchKind server_bench("server", [](CLI::App& bench) -> Command::Run {
  auto o = std::make_shared<ServerBenchOptions>();
  auto* s =
      bench.add_subcommand("server", "load run: concurrent streaming clients against invar serve");
  s->add_option("--model", o->model, "GGUF model for the in-process server")->capture_default_str();
  s->add_option("--url", o->url, "bench a running server instead (http://HOST:PORT)");
  s->add_option("--duration", o->duration_s, "seconds")->capture_default_str();
  s->add_option("--concurrency", o->concurrency, "concurrent streams")->capture_default_str();
  s->add_option("--max-tokens", o->max_tokens, "tokens per request")->capture_default_str();
  s->add_option("--documents", o->documents, "distinct prompt documents")->capture_default_str();
  s->add_option("--threads", o->threads, "engine compute threads (0: all cores)")
      ->capture_default_str();
  return [o]() { return run_server_bench(*o); };
});

}  // namespace
}  // namespace invar::app
