// Memory bounded by --cache-bytes for any model shape: a model with no attention layer (every
// KV block empty, so the budget admits hundreds of thousands of blocks) served by the real
// `invar serve` at a 64 MiB budget, 8 requests computing at once (--max-num-seqs 8, a step of
// up to 1024 tokens). After enough distinct prompts to fill and evict the cache, the process's
// peak resident memory (VmHWM) stays under model file + budget + the stated overhead + one live
// state per running request.
// Weights in place: a generated model (F32 ~1 GB, Q4_K_M ~0.3 GB) served and answering keeps one
// file's worth of weights resident, not a second copy.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "sanitizer_build.h"
#include "serve_process.h"

namespace serve_memory_test {

using namespace invar::server::testing;
using json = nlohmann::json;

namespace {

constexpr int64_t kBudget = int64_t{64} << 20;
// Everything but the model, the cache and the live states: code, heap, thread stacks, HTTP,
// tokenizer and (this model being tiny) the forward pass's buffers.
constexpr int64_t kFixedOverhead = int64_t{48} << 20;
constexpr int64_t kMaxRunning = 8;  // --max-num-seqs: one live state each, all held at once

int64_t status_kib(pid_t pid, const std::string& field) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
  return -1;
}

double metric(const std::string& text, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("\n" + name + " ([0-9.e+-]+)\n"))) return -1;
  return std::stod(m[1]);
}

int64_t log_number(const std::string& log, const std::string& before) {
  const auto p = log.find(before);
  return p == std::string::npos ? -1 : std::atoll(log.c_str() + p + before.size());
}

TEST(ServeMemory, AttentionFreeModelStaysWithinBudget) {
  const std::string model = std::string(INVAR_BINARY_DIR) + "/tests/server/gdn_only.gguf";
  // full_attention_interval above the layer count: every layer is a Gated DeltaNet.
  const std::string make = kInvarBin + " make-model --interval 1000 --vocab " + kTinyModel +
                           " --out " + model + " > /dev/null";
  ASSERT_EQ(std::system(make.c_str()), 0) << make;
  std::ifstream mf(model, std::ios::binary | std::ios::ate);
  const int64_t model_bytes = mf.tellg();
  ASSERT_GT(model_bytes, 0);

  // The engine's first step waits for kMaxRunning requests, so that many live states are held
  // at once however the clients below are scheduled.
  ServeProcess srv(
      {"--model", model, "--block-size", "16", "--threads", "1", "--cache-bytes",
       std::to_string(kBudget), "--max-num-seqs", std::to_string(kMaxRunning), "--max-batch-tokens",
       "1024", "--start-after-requests", std::to_string(kMaxRunning)},
      "serve_memory");
  ASSERT_NE(srv.port(), 0) << "server did not start:\n" << srv.log();
  const std::string log = srv.log();
  ASSERT_NE(log.find("cache budget 64.0 MiB"), std::string::npos) << log;
  ASSERT_NE(log.find(" B KV + "), std::string::npos) << log;
  EXPECT_EQ(log_number(log, "KV blocks ("), 0) << "this model should have no KV: " << log;
  const int64_t live_state = log_number(log, "live state ");
  ASSERT_GT(live_state, 0) << log;
  EXPECT_EQ(log_number(log, " per running request (up to "), kMaxRunning) << log;

  // kMaxRunning clients, 60 distinct prompts of 240 tokens between them.
  std::atomic<int> next{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < kMaxRunning; ++t)
    clients.emplace_back([&] {
      httplib::Client c("127.0.0.1", srv.port());
      c.set_read_timeout(120, 0);
      for (int r = next++; r < 60; r = next++) {
        std::mt19937 rng(3 + r);
        json ids = json::array();
        for (int i = 0; i < 240; ++i) ids.push_back(static_cast<int>(rng() % 400));
        const json body = {{"prompt", ids}, {"max_tokens", 2}};
        auto res = c.Post("/v1/completions", body.dump(), "application/json");
        EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no answer");
      }
    });
  for (auto& t : clients) t.join();
  httplib::Client c("127.0.0.1", srv.port());
  const std::string m = c.Get("/metrics")->body;
  EXPECT_EQ(metric(m, "invar_requests_total"), 60);
  EXPECT_GT(metric(m, "invar_cache_evictions_total"), 0) << "the budget was never full";
  EXPECT_LE(metric(m, "invar_cache_resident_bytes"), static_cast<double>(kBudget));

  if (invar::test::kSanitizerBuild) return;  // the resident bound is the release tree's
  const int64_t peak = status_kib(srv.pid(), "VmHWM") * 1024;
  const int64_t bound = model_bytes + kBudget + kFixedOverhead + kMaxRunning * live_state;
  EXPECT_LT(peak, bound) << "peak resident " << peak << " B, model " << model_bytes << " B";
  std::printf(
      "peak resident %.1f MiB; bound %.1f MiB (model %.1f MiB + budget 64 MiB + fixed 48 MiB + "
      "live states %lld x %.1f MiB)\n",
      peak / 1048576.0, bound / 1048576.0, model_bytes / 1048576.0,
      static_cast<long long>(kMaxRunning), live_state / 1048576.0);
}

// A generated model kept at a fixed path of the build tree, so that later runs reuse it (the
// name holds every generator flag; a changed flag writes a new file).
// In a sanitizer build the resident-memory bound is not checked (the release tree checks it), so
// the size that bound needs buys nothing there: the same generator flags at E = 256 and 2 layers
// (1/16 of the bytes) keep every code path the test runs (the mapping, the huge-page copy, the
// answer) and spare minutes of instrumented generation and hashing.
std::string generated_model(std::string flags, const std::string& name) {
  if (invar::test::kSanitizerBuild)
    for (const auto& [from, to] : {std::pair<std::string, std::string>{"--embd 1024", "--embd 256"},
                                   {"--layers 8", "--layers 2"}})
      if (auto at = flags.find(from); at != std::string::npos) flags.replace(at, from.size(), to);
  const std::string path = std::string(INVAR_BINARY_DIR) + "/tests/server/" + name + ".gguf";
  const std::string flags_path = path + ".flags";
  std::ifstream old_flags(flags_path);
  std::string old;
  std::getline(old_flags, old);
  if (old == flags && std::filesystem::exists(path)) return path;
  const std::string make = kInvarBin + " make-model " + flags + " --vocab " + kTinyModel +
                           " --out " + path + ".tmp > /dev/null";
  if (std::system(make.c_str()) != 0) return "";
  std::filesystem::rename(path + ".tmp", path);
  std::ofstream(flags_path) << flags << "\n";
  return path;
}

// AnonHugePages of the process in KiB (smaps_rollup), -1 where the kernel does not say.
int64_t anon_huge_kib(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/smaps_rollup");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("AnonHugePages:", 0) == 0) return std::stoll(line.substr(14));
  return -1;
}

// Whether this kernel hands out transparent huge pages to a region that asks (madvise or always).
bool thp_available() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(f, mode);
  return mode.find("[always]") != std::string::npos || mode.find("[madvise]") != std::string::npos;
}

// Serves `model` (with --huge-pages when `huge`), answers one completion (every layer's weights
// read; its choice with top-5 logprobs in *answer), and checks the process's resident memory: at
// least the file (the weights really are resident: MAP_POPULATE, or the copy) and below file ×
// (1 + slack) + the cache budget.
void expect_resident_near_file(const std::string& model, int64_t min_mib, double slack,
                               bool huge = false, json* answer = nullptr) {
  ASSERT_FALSE(model.empty()) << "make-model failed";
  const int64_t file_bytes = int64_t(std::filesystem::file_size(model));
  if (!invar::test::kSanitizerBuild) {
    ASSERT_GT(file_bytes, min_mib << 20) << "the model is smaller than this test means it to be";
  }
  std::vector<std::string> args{"--model", model,           "--threads",
                                "2",       "--cache-bytes", std::to_string(kBudget)};
  if (huge) args.push_back("--huge-pages");
  ServeProcess srv(args, "serve_memory_inplace");
  ASSERT_NE(srv.port(), 0) << "server did not start:\n" << srv.log();
  EXPECT_NE(srv.log().find(huge ? "copied into 2 MiB pages and bound in"
                                : "mapped and bound in place in"),
            std::string::npos)
      << srv.log();
  httplib::Client c("127.0.0.1", srv.port());
  c.set_read_timeout(60, 0);
  const json body = {{"prompt", json::array({1, 2, 3, 4, 5, 6, 7, 8})},
                     {"max_tokens", 4},
                     {"temperature", 0},
                     {"logprobs", 5},
                     {"echo", true}};
  auto res = c.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  if (answer) *answer = json::parse(res->body)["choices"][0];

  if (invar::test::kSanitizerBuild) return;  // the resident bound is the release tree's
  const int64_t rss = status_kib(srv.pid(), "VmRSS") * 1024;
  const int64_t bound = int64_t(double(file_bytes) * (1.0 + slack)) + kBudget;
  EXPECT_GE(rss, file_bytes) << "the weights are not resident: the bound below proves nothing";
  EXPECT_LT(rss, bound) << "resident " << rss << " B, file " << file_bytes << " B";
  std::printf("resident %.1f MiB: file %.1f MiB + %.1f MiB; bound %.1f MiB\n", rss / 1048576.0,
              file_bytes / 1048576.0, (rss - file_bytes) / 1048576.0, bound / 1048576.0);
  if (huge && thp_available()) {
    // The copy really is in huge pages (the kernel may still fall back for some of it).
    const int64_t huge_kib = anon_huge_kib(srv.pid());
    EXPECT_GT(huge_kib, 0) << "no 2 MiB page in the process: the copy did not get any";
    std::printf("anonymous huge pages %.1f MiB\n", huge_kib / 1024.0);
  }
}

// 8 layers of 8 experts, E = 1024: about 1 GB in F32.
TEST(ServeMemory, F32WeightsResidentOnce) {
  expect_resident_near_file(
      generated_model("--type f32 --embd 1024 --layers 8 --experts 8 --ff-exp 1024 "
                      "--ff-shexp 1024 --heads 8 --head-dim 128 --rot 64 --state 128 --groups 4 "
                      "--v-heads 8",
                      "inplace_f32"),
      900, 0.10);
}

// A Q4_K_M file as llama-quantize lays it out (q4_K matrices, q6_K where the preset wants them,
// F32 norms): about 0.3 GB, within 5% of the file plus the cache budget.
TEST(ServeMemory, Q4KMWeightsResidentOnce) {
  expect_resident_near_file(
      generated_model("--type q4_k_m --embd 1024 --layers 8 --experts 8 --ff-exp 2048 "
                      "--ff-shexp 2048 --heads 8 --head-dim 128 --rot 64 --state 128 --groups 4 "
                      "--v-heads 8",
                      "inplace_q4_k_m"),
      250, 0.05);
}

// --huge-pages: the weights a private copy in 2 MiB pages (the file mapping dropped), still
// resident once, and the same logprobs to the bit as from the file's mapping.
TEST(ServeMemory, HugePageCopyResidentOnceSameLogprobs) {
  const std::string model = generated_model(
      "--type q4_k_m --embd 1024 --layers 8 --experts 8 --ff-exp 2048 --ff-shexp 2048 --heads 8 "
      "--head-dim 128 --rot 64 --state 128 --groups 4 --v-heads 8",
      "inplace_q4_k_m");
  json mapped, copied;
  expect_resident_near_file(model, 250, 0.05, /*huge=*/false, &mapped);
  expect_resident_near_file(model, 250, 0.05, /*huge=*/true, &copied);
  ASSERT_TRUE(mapped.contains("logprobs") && mapped["logprobs"].contains("top_logprobs"))
      << mapped.dump();
  EXPECT_EQ(mapped["logprobs"]["top_logprobs"].size(), 12u) << mapped.dump();  // 8 echoed + 4
  EXPECT_EQ(mapped.dump(), copied.dump());
}

}  // namespace

}  // namespace serve_memory_test
