// Memory returns after load: the real `invar serve` refuses 1000 large requests (160 KiB
// bodies here; 2 MB in the soak, with the remedies off as a control), then idles; its resident
// memory falls back to within a few MiB of what it was before (malloc_trim once idle, large
// buffers mapped: server/memory_return.h). Figures are printed.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "serve_process.h"

namespace serve_memory_return_test {

using namespace invar::server::testing;
using json = nlohmann::json;

namespace {

// Three bodies of about `bytes` each that the tiny model refuses (400): a logit_bias, more
// messages than the context, a prompt longer than the context can hold.
std::vector<std::pair<std::string, std::string>> large_bad_bodies(size_t bytes) {
  json bias = json::object();
  for (size_t i = 0; bias.dump().size() < bytes; i += 1000)
    for (size_t k = i; k < i + 1000; ++k) bias[std::to_string(k)] = 1;
  json msgs = json::array();
  while (msgs.size() * 32 < bytes) msgs.push_back({{"role", "user"}, {"content", ""}});
  return {{"/v1/completions", json{{"prompt", "a"}, {"logit_bias", bias}}.dump()},
          {"/v1/chat/completions", json{{"messages", msgs}}.dump()},
          {"/v1/completions", json{{"prompt", std::string(bytes, 'p')}}.dump()}};
}

struct Figures {
  int64_t before_kib = 0, after_load_kib = 0, after_idle_kib = 0;
  double trims = 0;
  int rejected = 0;
};

Figures drive(const std::vector<std::string>& flags, size_t body_bytes, int n_requests,
              const std::string& name) {
  Figures f;
  std::vector<std::string> args = {"--model", kTinyModel, "--threads", "1", "--log-format", "none"};
  args.insert(args.end(), flags.begin(), flags.end());
  ServeProcess srv(args, name);
  EXPECT_NE(srv.port(), 0) << srv.log();
  if (srv.port() == 0) return f;
  const auto bodies = large_bad_bodies(body_bytes);
  auto client = [&] {
    httplib::Client c("127.0.0.1", srv.port());
    c.set_read_timeout(60, 0);
    return c;
  };
  // Warm: every kind once, a completion, then an idle period (threads, arenas and the
  // tokenizer's caches exist before the measure).
  {
    auto c = client();
    for (const auto& [path, body] : bodies) c.Post(path.c_str(), body, "application/json");
    c.Post("/v1/completions", R"({"prompt":"warm","max_tokens":4})", "application/json");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  f.before_kib = resident_kib(srv.pid());
  std::atomic<int> next{0}, rejected{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&] {
      auto c = client();
      for (int i; (i = next++) < n_requests;) {
        const auto& [path, body] = bodies[size_t(i) % bodies.size()];
        auto r = c.Post(path.c_str(), body, "application/json");
        rejected += r && r->status == 400;
      }
    });
  for (auto& t : ts) t.join();
  f.rejected = rejected;
  f.after_load_kib = resident_kib(srv.pid());
  // Idle: the trim comes a second after the last response.
  for (int i = 0; i < 40; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    f.after_idle_kib = resident_kib(srv.pid());
    if (i >= 12 && f.after_idle_kib <= f.before_kib) break;
  }
  f.trims = metric_value(client().Get("/metrics")->body, "invar_memory_trims_total");
  std::printf(
      "%s: %d of %d %zu-byte requests rejected; resident %.1f MiB before, %.1f after the "
      "load, %.1f after idling (trims %.0f)\n",
      name.c_str(), f.rejected, n_requests, body_bytes, f.before_kib / 1024.0,
      f.after_load_kib / 1024.0, f.after_idle_kib / 1024.0, f.trims);
  return f;
}

constexpr int64_t kGrowthBoundKib = 8 << 10;

TEST(ServeMemoryReturn, ThousandRejectedLargeRequestsLeaveNoGrowth) {
  const bool soak = std::getenv("INVAR_MEMORY_SOAK") != nullptr;
  const size_t bytes = soak ? (2u << 20) : (160u << 10);
  const Figures f = drive({}, bytes, 1000, "serve_memory_return");
  EXPECT_EQ(f.rejected, 1000);
  EXPECT_GE(f.trims, 1) << "the server never trimmed";
  EXPECT_LE(f.after_idle_kib - f.before_kib, kGrowthBoundKib)
      << "resident memory grew by " << (f.after_idle_kib - f.before_kib) << " KiB";
  if (!soak) return;
  // The control: glibc's defaults keep what the load took.
  const Figures off = drive({"--idle-trim-seconds", "0", "--malloc-mmap-threshold", "0"}, bytes,
                            1000, "serve_memory_return_off");
  EXPECT_GT(off.after_idle_kib - off.before_kib, kGrowthBoundKib)
      << "without the remedies memory returned anyway: the bound above proves nothing";
}

}  // namespace

}  // namespace serve_memory_return_test
