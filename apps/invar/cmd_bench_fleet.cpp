// `invar bench fleet`: N `invar serve` replicas behind nginx on loopback (the bench starts them,
// nginx configured by deploy/nginx/render-nginx-conf), requests that share long prefixes, one
// run per arm: how requests are routed (spread over the replicas, or by an X-Cache-Salt header
// per tenant) and which tier the replicas share (none, one --cache-dir, one Redis). Prints the
// prefix-cache hit rate, time to first token p50/p99 and tokens/s per replica for each arm.
#include <httplib.h>
#include <sys/stat.h>
#include <unistd.h>

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
#include "fleet_processes.h"

namespace invar::app {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct FleetBenchOptions {
  std::string model = std::string(INVAR_SOURCE_DIR) + "/tests/data/models/qwen3next-tiny.gguf";
  std::string render = std::string(INVAR_SOURCE_DIR) + "/deploy/nginx/render-nginx-conf";
  std::string nginx = "nginx";
  std::string redis_server = "redis-server";
  std::vector<std::string> arms = {"spread", "affinity", "disk", "redis"};
  int replicas = 3;
  int requests = 60;
  int tenants = 4;         // distinct long prefixes, one cache_salt each
  int prefix_words = 600;  // the tiny model reads ~3.5 tokens per word
  int64_t max_tokens = 16;
  int concurrency = 3;
  int threads = 1;  // compute threads per replica
  std::string work_dir;
  bool quick = false;  // --quick: every arm at the smallest size that still shares prefixes
};

struct Arm {
  std::string name, tier, routing;
  bool header = false;  // X-Cache-Salt sent: nginx routes each tenant to one replica
  std::string shared;   // "", "disk" or "redis"
};

const std::vector<Arm> kArms = {
    {"spread", "none", "spread", false, ""},
    {"affinity", "none", "X-Cache-Salt", true, ""},
    {"disk", "--cache-dir", "spread", false, "disk"},
    {"redis", "--cache-redis", "spread", false, "redis"},
};

struct ReplicaTotals {
  double requests = 0, prompt = 0, cached = 0, generated = 0;
};

struct ArmResult {
  std::vector<double> ttft_s;
  std::vector<ReplicaTotals> replicas;
  int64_t errors = 0;
  std::string first_error;
  double wall_s = 0;
};

std::string tenant_prefix(int tenant, int words) {
  static const char* kWords[] = {"river", "stone", "lamp",  "orbit", "maple", "copper",
                                 "quiet", "delta", "pearl", "cedar", "amber", "signal"};
  std::string s = "Tenant " + std::to_string(tenant) + " handbook:";
  for (int w = 0; w < words; ++w)
    s += std::string(" ") + kWords[(w * 7 + tenant * 5 + w / 12) % 12];
  return s;
}

double metric_read(const std::string& text, const std::string& name) {
  for (size_t at = text.find(name + " "); at != std::string::npos;
       at = text.find(name + " ", at + 1))
    if (at == 0 || text[at - 1] == '\n') return std::atof(text.c_str() + at + name.size() + 1);
  return 0;
}

void client_run(int nginx_port, const FleetBenchOptions& o, const Arm& arm,
                const std::vector<std::string>& prefixes, std::atomic<int>& next, ArmResult& r,
                std::mutex& mu) {
  httplib::Client cli("127.0.0.1", nginx_port);
  cli.set_read_timeout(600, 0);
  for (int i = next++; i < o.requests; i = next++) {
    const int tenant = i % o.tenants;
    const std::string salt = "tenant-" + std::to_string(tenant);
    nlohmann::json body = {{"prompt", prefixes[size_t(tenant)] + " Question " + std::to_string(i)},
                           {"max_tokens", o.max_tokens},
                           {"temperature", 0},
                           {"ignore_eos", true},
                           {"stream", true},
                           {"cache_salt", salt}};
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    if (arm.header) req.set_header("X-Cache-Salt", salt);
    const auto t0 = Clock::now();
    double ttft = -1;
    std::string received;
    req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
      received.append(data, len);
      if (ttft < 0 && received.find("\"text\"") != std::string::npos)
        ttft = std::chrono::duration<double>(Clock::now() - t0).count();
      return true;
    };
    auto res = cli.send(req);
    std::lock_guard<std::mutex> lock(mu);
    if (res && res->status == 200 && received.find("data: [DONE]") != std::string::npos) {
      r.ttft_s.push_back(ttft);
    } else {
      r.errors++;
      if (r.first_error.empty())
        r.first_error = res ? "HTTP " + std::to_string(res->status) + " " + received.substr(0, 200)
                            : "connection error " + httplib::to_string(res.error());
    }
  }
}

ArmResult arm_run(const FleetBenchOptions& o, const Arm& arm, const fs::path& dir,
                  const std::vector<std::string>& prefixes) {
  fs::create_directories(dir);
  ::chmod(dir.c_str(), 0755);  // nginx's workers may run as another user when started as root
  ChildProcess redis;
  std::vector<std::string> serve_args = {"--model", o.model, "--threads",
                                         std::to_string(o.threads)};
  if (arm.shared == "disk") {
    fs::create_directories(dir / "cache");
    serve_args.insert(serve_args.end(), {"--cache-dir", (dir / "cache").string()});
  } else if (arm.shared == "redis") {
    const int port = redis_start(redis, o.redis_server, dir);
    // Replicas sharing Redis share the secret its records are sealed with.
    const fs::path key = dir / "tier.key";
    {
      std::ofstream out(key);
      out << std::string(64, 'b') << "\n";
    }
    fs::permissions(key, fs::perms::owner_read | fs::perms::owner_write);
    serve_args.insert(serve_args.end(),
                      {"--cache-redis", "redis://127.0.0.1:" + std::to_string(port),
                       "--cache-tier-key", key.string()});
  }
  std::vector<ChildProcess> replicas(size_t(o.replicas));
  std::vector<int> ports;
  std::vector<std::string> upstreams;
  for (int i = 0; i < o.replicas; ++i) {
    ports.push_back(replica_start(replicas[size_t(i)], serve_args,
                                  dir / ("replica" + std::to_string(i) + ".log"), 300));
    upstreams.push_back("127.0.0.1:" + std::to_string(ports.back()));
  }
  ChildProcess nginx;
  const int nginx_port =
      nginx_start(nginx, o.nginx, o.render, "--fallback spread", upstreams, dir / "nginx");

  ArmResult r;
  std::atomic<int> next{0};
  std::mutex mu;
  const auto start = Clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < o.concurrency; ++c)
    clients.emplace_back(client_run, nginx_port, std::cref(o), std::cref(arm), std::cref(prefixes),
                         std::ref(next), std::ref(r), std::ref(mu));
  for (auto& t : clients) t.join();
  r.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  for (int port : ports) {
    httplib::Client c("127.0.0.1", port);
    auto m = c.Get("/metrics");
    const std::string text = m ? m->body : "";
    r.replicas.push_back({metric_read(text, "invar_requests_total"),
                          metric_read(text, "invar_prompt_tokens_total"),
                          metric_read(text, "invar_cached_tokens_total"),
                          metric_read(text, "invar_generated_tokens_total")});
  }
  return r;
}

int fleet_bench_run(const FleetBenchOptions& o) {
  if (o.replicas < 1 || o.requests < 1 || o.tenants < 1 || o.concurrency < 1 || o.prefix_words < 1)
    throw Error("--replicas, --requests, --tenants, --concurrency and --prefix-words must be >= 1");
  if (!fs::exists(o.model)) throw Error("no model file at " + o.model + " (--model)");
  std::vector<const Arm*> arms;
  for (const auto& name : o.arms) {
    auto it =
        std::find_if(kArms.begin(), kArms.end(), [&](const Arm& a) { return a.name == name; });
    if (it == kArms.end())
      throw Error("--arms: unknown arm '" + name + "' (spread, affinity, disk, redis)");
    arms.push_back(&*it);
  }
  const fs::path root = o.work_dir.empty() ? fs::temp_directory_path() /
                                                 ("invar-bench-fleet-" + std::to_string(getpid()))
                                           : fs::path(o.work_dir);
  std::vector<std::string> prefixes;
  for (int t = 0; t < o.tenants; ++t) prefixes.push_back(tenant_prefix(t, o.prefix_words));

  std::printf(
      "invar bench fleet: %d replicas behind nginx, %d requests, %d tenants x %d-word prefix, "
      "%lld generated, %d clients, %d thread(s) per replica\n",
      o.replicas, o.requests, o.tenants, o.prefix_words, static_cast<long long>(o.max_tokens),
      o.concurrency, o.threads);
  std::printf("%-9s %-14s %-13s %8s %10s %10s %7s  %s\n", "arm", "shared tier", "routing",
              "hit rate", "TTFT p50", "TTFT p99", "errors",
              "per replica: requests / generated tok/s / prefilled tok/s");
  int failed = 0;
  for (const Arm* arm : arms) {
    ArmResult r = arm_run(o, *arm, root / arm->name, prefixes);
    double prompt = 0, cached = 0;
    std::string per;
    for (const auto& t : r.replicas) {
      prompt += t.prompt;
      cached += t.cached;
      char cell[96];
      std::snprintf(cell, sizeof cell, "  %.0f / %.1f / %.0f", t.requests, t.generated / r.wall_s,
                    (t.prompt - t.cached) / r.wall_s);
      per += cell;
    }
    std::printf("%-9s %-14s %-13s %7.1f%% %9.3fs %9.3fs %7lld %s\n", arm->name.c_str(),
                arm->tier.c_str(), arm->routing.c_str(), prompt > 0 ? 100 * cached / prompt : 0.0,
                percentile(r.ttft_s, 0.5), percentile(r.ttft_s, 0.99),
                static_cast<long long>(r.errors), per.c_str());
    if (!r.first_error.empty()) std::printf("  first error: %s\n", r.first_error.c_str());
    std::fflush(stdout);
    failed += r.errors > 0;
  }
  if (o.work_dir.empty()) fs::remove_all(root);
  return failed == 0 ? 0 : 1;
}

BenchKind fleet_bench("fleet", [](CLI::App& bench) -> Command::Run {
  auto o = std::make_shared<FleetBenchOptions>();
  auto* s = bench.add_subcommand(
      "fleet", "replicas behind nginx, shared long prefixes: hit rate, TTFT, tokens/s per replica");
  s->add_option("--model", o->model, "GGUF model every replica serves")->capture_default_str();
  s->add_option("--replicas", o->replicas, "invar serve processes")->capture_default_str();
  s->add_option("--arms", o->arms,
                "spread (no header, no shared tier), affinity (X-Cache-Salt routing), disk (one "
                "--cache-dir for all), redis (one --cache-redis for all)")
      ->delimiter(',')
      ->capture_default_str();
  s->add_option("--requests", o->requests, "requests per arm")->capture_default_str();
  s->add_option("--tenants", o->tenants, "distinct shared prefixes (one cache_salt each)")
      ->capture_default_str();
  s->add_option("--prefix-words", o->prefix_words, "words per shared prefix (~tokens)")
      ->capture_default_str();
  s->add_option("--max-tokens", o->max_tokens, "tokens generated per request")
      ->capture_default_str();
  s->add_option("--concurrency", o->concurrency, "concurrent streaming clients")
      ->capture_default_str();
  s->add_option("--threads", o->threads, "compute threads per replica")->capture_default_str();
  s->add_option("--nginx", o->nginx, "nginx binary")->capture_default_str();
  s->add_option("--redis-server", o->redis_server, "redis-server binary (arm redis)")
      ->capture_default_str();
  s->add_option("--render", o->render, "the nginx configuration renderer")->capture_default_str();
  s->add_option("--work-dir", o->work_dir, "keep logs, nginx files and the disk tier here");
  s->add_flag("--quick", o->quick,
              "small run: 2 replicas, 8 requests, 2 tenants x 60-word prefixes, 4 tokens, 2 "
              "clients (flags given explicitly still win)");
  return [o, s]() {
    FleetBenchOptions run = *o;
    if (run.quick) {
      if (s->count("--replicas") == 0) run.replicas = 2;
      if (s->count("--requests") == 0) run.requests = 8;
      if (s->count("--tenants") == 0) run.tenants = 2;
      if (s->count("--prefix-words") == 0) run.prefix_words = 60;
      if (s->count("--max-tokens") == 0) run.max_tokens = 4;
      if (s->count("--concurrency") == 0) run.concurrency = 2;
    }
    return fleet_bench_run(run);
  };
});

}  // namespace
}  // namespace invar::app
