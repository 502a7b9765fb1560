// The second and third cache tiers through real processes: `invar serve` with --cache-dir and
// --cache-redis on the tiny reference model, a real redis-server on a free loopback port, curl-
// free HTTP from cpp-httplib. Every claim compares the top-20 logprobs of a request against a
// cold run (--no-prefix-cache) bit for bit AND checks that the tier served it (cached_tokens,
// tier counters): restart after SIGTERM, after SIGKILL in the middle of a file write, a damaged
// file, two servers writing and reading one directory at once, a prefix warmed on server A
// served by server B through Redis, salts kept apart in memory, on disk and in Redis, and
// budgets under a soak (INVAR_TIER_SOAK_N requests; the 10,000-request run carries the soak
// label).
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>
#include <xxhash.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <thread>

#include "cache/redis_process.h"
#include "http_test_util.h"
#include "sanitizer_build.h"
#include "serve_process.h"

namespace tier_serve_test {

using namespace invar::server::testing;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kPromptTokens = 3000;
constexpr int64_t kBlock = 64;
constexpr int64_t kFullHit = (kPromptTokens - 1) / kBlock * kBlock;  // 2944

std::vector<int32_t> prompt_make(uint32_t seed, int64_t n) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (auto& t : p) t = static_cast<int32_t>(10 + rng() % 200);
  return p;
}

const std::vector<int32_t>& long_prompt() {
  static const std::vector<int32_t> p = prompt_make(1, kPromptTokens);
  return p;
}

// The tier read timeout is raised from its 0.25 s default: these tests assert whole hits, and a
// lookup under a sanitizer on a loaded machine (another test beside it, the writer thread busy)
// can take longer, cutting the hit short by design (TierServe.SaltsStayApart... saw 39 of 46
// blocks under ASan).
std::vector<std::string> serve_args(std::vector<std::string> extra, int64_t block = kBlock) {
  std::vector<std::string> a = {"--model",
                                kTinyModel,
                                "--threads",
                                "1",
                                "--block-size",
                                std::to_string(block),
                                "--log-format",
                                "none",
                                "--cache-tier-timeout",
                                "60"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

json complete(const ServeProcess& s, const std::vector<int32_t>& prompt, const std::string& salt,
              int64_t max_tokens = 4, int64_t logprobs = 20) {
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(300, 0);
  json body = {{"prompt", prompt},
               {"max_tokens", max_tokens},
               {"temperature", 0},
               {"ignore_eos", true},
               {"return_tokens_as_token_ids", true}};
  if (logprobs > 0) body["logprobs"] = logprobs;
  if (!salt.empty()) body["cache_salt"] = salt;
  auto r = c.Post("/v1/completions", body.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return json();
  EXPECT_EQ(r->status, 200) << r->body;
  return json::parse(r->body);
}

int64_t cached_of(const json& r) {
  return r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
}

// Per generated token: id, logprob and the 20 candidates exactly as the server printed them.
std::vector<std::string> logprob_entries(const json& r) {
  std::vector<std::string> out;
  const json& lp = r["choices"][0]["logprobs"];
  for (size_t i = 0; i < lp["tokens"].size(); ++i)
    out.push_back(json{lp["tokens"][i], lp["token_logprobs"][i], lp["top_logprobs"][i]}.dump());
  return out;
}

std::string metrics_of(const ServeProcess& s) {
  httplib::Client c("127.0.0.1", s.port());
  auto r = c.Get("/metrics");
  return r ? r->body : "";
}

// A tier-labelled sample of /metrics, −1 if absent.
double tier_metric(const std::string& text, const std::string& name, const std::string& tier) {
  const std::string head = "\n" + name + "{tier=\"" + tier + "\"} ";
  const auto p = text.find(head);
  return p == std::string::npos ? -1 : std::stod(text.substr(p + head.size()));
}

// Until the tiers' write queue is empty and `writes` of `tier` stops moving.
double writes_settle(const ServeProcess& s, const std::string& tier) {
  double last = -2;
  for (int i = 0; i < 600; ++i) {
    const std::string m = metrics_of(s);
    const double w = tier_metric(m, "invar_cache_tier_writes_total", tier);
    if (w == last && metric_value(m, "invar_cache_tier_queue_bytes") == 0) return w;
    last = w;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return last;
}

std::vector<fs::path> files_with(const std::string& dir, const std::string& ext) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (auto& e : fs::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ext) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// --cache-tier-key: one deployment's secret, every replica of a test holds it.
std::string tier_key() {
  return invar::testing::tier_key_file(
      std::string(INVAR_BINARY_DIR) + "/tests/server/tier-test.key", 'e');
}

std::string fresh_dir(const std::string& name) {
  const std::string d = std::string(INVAR_BINARY_DIR) + "/tests/server/tier-" + name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

class TierServe : public ::testing::Test {
 protected:
  // The cold answer: no cache of any kind.
  static void SetUpTestSuite() {
    ServeProcess cold(serve_args({"--no-prefix-cache"}), "tier_cold");
    ASSERT_NE(cold.port(), 0) << cold.log();
    const json r = complete(cold, long_prompt(), "");
    cold_ = new std::vector<std::string>(logprob_entries(r));
    ASSERT_EQ(cold_->size(), 4u);
    ASSERT_EQ(cached_of(r), 0);
  }
  static void TearDownTestSuite() {
    delete cold_;
    cold_ = nullptr;
  }
  static void expect_cold_bits(const json& r, const char* what) {
    EXPECT_EQ(logprob_entries(r), *cold_) << what << ": the logprobs differ from a cold run";
  }
  static std::vector<std::string>* cold_;
};
std::vector<std::string>* TierServe::cold_ = nullptr;

TEST_F(TierServe, RestartAfterSigtermServesThePrefixFromDisk) {
  const std::string dir = fresh_dir("sigterm");
  {
    ServeProcess a(serve_args({"--cache-dir", dir}), "tier_sigterm_a");
    ASSERT_NE(a.port(), 0) << a.log();
    const json r = complete(a, long_prompt(), "");
    EXPECT_EQ(cached_of(r), 0);
    expect_cold_bits(r, "first run");
    EXPECT_EQ(a.stop(SIGTERM, 60), 0) << a.log();  // the write queue is written out
    EXPECT_NE(a.log().find("/tier.key): disk"), std::string::npos) << a.log();
  }
  EXPECT_EQ(static_cast<int64_t>(files_with(dir, ".blk").size()), kFullHit / kBlock);
  ServeProcess b(serve_args({"--cache-dir", dir}), "tier_sigterm_b");
  ASSERT_NE(b.port(), 0) << b.log();
  const json r = complete(b, long_prompt(), "");
  EXPECT_EQ(cached_of(r), kFullHit) << "the restarted server must find the prefix on disk";
  expect_cold_bits(r, "after restart");
  const std::string m = metrics_of(b);
  EXPECT_EQ(tier_metric(m, "invar_cache_tier_hits_total", "disk"), kFullHit / kBlock);
  EXPECT_EQ(tier_metric(m, "invar_cache_tier_corrupt_total", "disk"), 0);
}

TEST_F(TierServe, SigkillDuringAWriteLeavesOnlyWholeFiles) {
  const std::string dir = fresh_dir("sigkill");
  {
    // Every file write pauses half-way, so the kill lands inside one.
    ServeProcess a(serve_args({"--cache-dir", dir, "--cache-dir-write-delay-ms", "150"}),
                   "tier_sigkill_a");
    ASSERT_NE(a.port(), 0) << a.log();
    expect_cold_bits(complete(a, long_prompt(), ""), "first run");
    bool mid_write = false;
    for (int i = 0; i < 3000 && !mid_write; ++i) {
      mid_write = files_with(dir, ".blk").size() >= 3 && !files_with(dir, ".tmp").empty();
      if (!mid_write) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_TRUE(mid_write) << "no write in progress was seen";
    a.signal(SIGKILL);
    EXPECT_EQ(a.stop(SIGKILL, 30), 128 + SIGKILL);
  }
  const auto whole = files_with(dir, ".blk");
  ASSERT_GE(whole.size(), 3u);
  ASSERT_LT(static_cast<int64_t>(whole.size()), kFullHit / kBlock) << "the kill came too late";
  EXPECT_FALSE(files_with(dir, ".tmp").empty()) << "the interrupted write's temporary file";
  for (const auto& f : whole) EXPECT_EQ(fs::file_size(f), fs::file_size(whole[0])) << f;

  ServeProcess b(serve_args({"--cache-dir", dir}), "tier_sigkill_b");
  ASSERT_NE(b.port(), 0) << b.log();
  EXPECT_TRUE(files_with(dir, ".tmp").empty()) << "a dead writer's temporary file stays";
  const json r = complete(b, long_prompt(), "");
  EXPECT_GT(cached_of(r), 0) << "the files written before the kill must serve";
  EXPECT_LT(cached_of(r), kFullHit);
  expect_cold_bits(r, "after SIGKILL");
  EXPECT_EQ(tier_metric(metrics_of(b), "invar_cache_tier_corrupt_total", "disk"), 0);
}

TEST_F(TierServe, DamagedFileIsSkippedCountedAndRemoved) {
  const std::string dir = fresh_dir("corrupt");
  {
    ServeProcess a(serve_args({"--cache-dir", dir}), "tier_corrupt_a");
    ASSERT_NE(a.port(), 0) << a.log();
    complete(a, long_prompt(), "");
    EXPECT_EQ(a.stop(SIGTERM, 60), 0) << a.log();
  }
  auto files = files_with(dir, ".blk");
  ASSERT_EQ(static_cast<int64_t>(files.size()), kFullHit / kBlock);
  const fs::path victim = files[files.size() / 2];
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(victim) / 2));
    f.put('\x55');
    f.put('\xaa');
  }
  ServeProcess b(serve_args({"--cache-dir", dir}), "tier_corrupt_b");
  ASSERT_NE(b.port(), 0) << b.log();
  const json r = complete(b, long_prompt(), "");
  EXPECT_LT(cached_of(r), kFullHit) << "the restore must stop at the damaged record";
  expect_cold_bits(r, "with a damaged file");
  EXPECT_EQ(tier_metric(metrics_of(b), "invar_cache_tier_corrupt_total", "disk"), 1);
  // The damaged record was removed when met, and its block, recomputed, written whole again.
  writes_settle(b, "disk");
  ASSERT_TRUE(fs::exists(victim));
  EXPECT_EQ(fs::file_size(victim), fs::file_size(files[0]));
  EXPECT_EQ(b.stop(SIGTERM, 60), 0) << b.log();
  ServeProcess c(serve_args({"--cache-dir", dir}), "tier_corrupt_c");
  ASSERT_NE(c.port(), 0) << c.log();
  const json whole = complete(c, long_prompt(), "");
  EXPECT_EQ(cached_of(whole), kFullHit);
  expect_cold_bits(whole, "after the rewrite");
  EXPECT_EQ(tier_metric(metrics_of(c), "invar_cache_tier_corrupt_total", "disk"), 0);
}

// The forgery the unkeyed records allowed, end to end: an attacker who can write the cache
// directory computes the victim prompt's chain keys offline (XXH3 with the public seeds) and
// files its own prompt's records under them, each edited the old way (the KV bytes changed, the
// XXH3 checksum recomputed). The victim's first-ever request is answered cold, bit for bit, and
// never reads them; a record of the tier, edited and resealed alike, is refused when met.
TEST_F(TierServe, ForgedAndPlantedRecordsNeverAnswer) {
  const std::string dir = fresh_dir("forged");
  {
    ServeProcess a(serve_args({"--cache-dir", dir}), "tier_forged_attacker");
    ASSERT_NE(a.port(), 0) << a.log();
    complete(a, prompt_make(2, kPromptTokens), "");
    EXPECT_EQ(a.stop(SIGTERM, 60), 0) << a.log();
  }
  auto files = files_with(dir, ".blk");
  ASSERT_EQ(static_cast<int64_t>(files.size()), kFullHit / kBlock);
  const fs::path model_dir = files[0].parent_path().parent_path();
  const auto forge = [](const fs::path& from, const fs::path& to) {
    std::ifstream in(from, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 64; ++i) bytes[i] ^= 0x40;
    const uint64_t sum = XXH3_64bits(bytes.data(), bytes.size() - 8);
    std::memcpy(bytes.data() + bytes.size() - 8, &sum, 8);
    fs::create_directories(to.parent_path());
    std::ofstream(to, std::ios::binary) << bytes;
  };
  const std::vector<int32_t>& victim = long_prompt();
  uint64_t parent = XXH3_64bits_withSeed("", 0, 0x696e766172ull);
  for (int64_t i = 0; i < kFullHit / kBlock; ++i) {
    parent = XXH3_64bits_withSeed(victim.data() + i * kBlock, kBlock * sizeof(int32_t), parent);
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(parent));
    forge(files[static_cast<size_t>(i)],
          model_dir / std::string(hex, 2) / (std::string(hex) + ".blk"));
  }
  forge(files[0], files[0]);  // and one of the tier's own records, edited in place
  ServeProcess b(serve_args({"--cache-dir", dir}), "tier_forged_victim");
  ASSERT_NE(b.port(), 0) << b.log();
  const json r = complete(b, long_prompt(), "");
  EXPECT_EQ(cached_of(r), 0) << "the victim was answered from planted records";
  expect_cold_bits(r, "beside planted records");
  const std::string m = metrics_of(b);
  EXPECT_EQ(tier_metric(m, "invar_cache_tier_hits_total", "disk"), 0);
  EXPECT_EQ(tier_metric(m, "invar_cache_tier_corrupt_total", "disk"), 0)
      << "planted names are read";
  const json own = complete(b, prompt_make(2, kPromptTokens), "");
  EXPECT_EQ(tier_metric(metrics_of(b), "invar_cache_tier_corrupt_total", "disk"), 1)
      << "the edited record is refused and counted when met";
  EXPECT_LT(cached_of(own), kFullHit) << "the restore stops at the edited record";
}

TEST_F(TierServe, PrefixWarmedOnOneServerIsAHitOnAnotherThroughRedis) {
  invar::testing::RedisProcess redis;
  ASSERT_NE(redis.port(), 0) << redis.failure();
  ServeProcess a(serve_args({"--cache-redis", redis.url(), "--cache-tier-key", tier_key()}),
                 "tier_redis_a");
  ASSERT_NE(a.port(), 0) << a.log();
  EXPECT_NE(a.log().find("): redis 127.0.0.1"), std::string::npos) << a.log();
  expect_cold_bits(complete(a, long_prompt(), "fleet"), "server A");
  EXPECT_EQ(writes_settle(a, "redis"), kFullHit / kBlock);
  ServeProcess b(serve_args({"--cache-redis", redis.url(), "--cache-tier-key", tier_key()}),
                 "tier_redis_b");
  ASSERT_NE(b.port(), 0) << b.log();
  const json r = complete(b, long_prompt(), "fleet");
  EXPECT_EQ(cached_of(r), kFullHit) << "server B must find A's prefix in Redis";
  expect_cold_bits(r, "server B through Redis");
  EXPECT_EQ(tier_metric(metrics_of(b), "invar_cache_tier_hits_total", "redis"), kFullHit / kBlock);
}

TEST_F(TierServe, SaltsStayApartInMemoryOnDiskAndInRedis) {
  invar::testing::RedisProcess redis;
  ASSERT_NE(redis.port(), 0) << redis.failure();
  const std::string dir = fresh_dir("salt");
  {
    ServeProcess a(serve_args({"--cache-dir", dir, "--cache-redis", redis.url(), "--cache-tier-key",
                               tier_key()}),
                   "tier_salt_a");
    ASSERT_NE(a.port(), 0) << a.log();
    complete(a, long_prompt(), "tenant-a");
    const json other = complete(a, long_prompt(), "tenant-b");
    EXPECT_EQ(cached_of(other), 0) << "memory: another salt";
    expect_cold_bits(other, "memory, other salt");
    EXPECT_EQ(cached_of(complete(a, long_prompt(), "tenant-a")), kFullHit) << "memory: same salt";
    EXPECT_EQ(a.stop(SIGTERM, 60), 0) << a.log();
  }
  // Only tenant-a's blocks are in the tiers now; tenant-b's were computed and written too, so
  // wipe them by starting over with tenant-a alone.
  fs::remove_all(dir);
  redis.command({"FLUSHALL"});
  {
    ServeProcess a(serve_args({"--cache-dir", dir, "--cache-redis", redis.url(), "--cache-tier-key",
                               tier_key()}),
                   "tier_salt_w");
    ASSERT_NE(a.port(), 0) << a.log();
    complete(a, long_prompt(), "tenant-a");
    EXPECT_EQ(a.stop(SIGTERM, 60), 0) << a.log();
  }
  {
    ServeProcess disk(serve_args({"--cache-dir", dir, "--cache-tier-key", tier_key()}),
                      "tier_salt_disk");
    ASSERT_NE(disk.port(), 0) << disk.log();
    const json b = complete(disk, long_prompt(), "tenant-b");
    EXPECT_EQ(cached_of(b), 0) << "disk: another salt";
    expect_cold_bits(b, "disk, other salt");
    EXPECT_EQ(cached_of(complete(disk, long_prompt(), "")), 0) << "disk: no salt";
    EXPECT_EQ(tier_metric(metrics_of(disk), "invar_cache_tier_hits_total", "disk"), 0);
  }
  ServeProcess red(serve_args({"--cache-redis", redis.url(), "--cache-tier-key", tier_key()}),
                   "tier_salt_redis");
  ASSERT_NE(red.port(), 0) << red.log();
  const json b = complete(red, long_prompt(), "tenant-b");
  EXPECT_EQ(cached_of(b), 0) << "Redis: another salt";
  expect_cold_bits(b, "Redis, other salt");
  EXPECT_EQ(tier_metric(metrics_of(red), "invar_cache_tier_hits_total", "redis"), 0);
  const json a = complete(red, long_prompt(), "tenant-a");
  EXPECT_EQ(cached_of(a), kFullHit)
      << "Redis: the same salt hits; read timeouts "
      << metric_value(metrics_of(red), "invar_cache_tier_read_timeouts_total");
  expect_cold_bits(a, "Redis, same salt");
}

// Two replicas on one --cache-dir at once (deploy/k8s/cache-dir.yaml): started together without
// --cache-tier-key, so that both make or read DIR/tier.key at the same moment; each writes its
// own prompt's records while the other writes (every record write paused half-way, so the writes
// interleave), then each reads the other's whole with the bits of a cold run; then both write the
// same records at once and a third process reads them whole. No record is ever counted corrupt.
TEST_F(TierServe, TwoServersShareOneDirectoryAtOnce) {
  const std::string dir = fresh_dir("shared");
  const std::vector<std::string> args =
      serve_args({"--cache-dir", dir, "--cache-dir-write-delay-ms", "10"});
  std::unique_ptr<ServeProcess> a;
  std::thread start_a([&] { a = std::make_unique<ServeProcess>(args, "tier_shared_a"); });
  ServeProcess b(args, "tier_shared_b");
  start_a.join();
  ASSERT_NE(a->port(), 0) << a->log();
  ASSERT_NE(b.port(), 0) << b.log();
  // Both at once: x on server a, y on server b.
  const auto both = [&](const std::vector<int32_t>& x, const std::vector<int32_t>& y) {
    json rx;
    std::thread t([&] { rx = complete(*a, x, ""); });
    json ry = complete(b, y, "");
    t.join();
    return std::pair<json, json>{rx, ry};
  };
  const std::vector<int32_t> other = prompt_make(5, 1000);
  constexpr int64_t kOtherHit = (1000 - 1) / kBlock * kBlock;
  const auto [first_a, first_b] = both(long_prompt(), other);
  ASSERT_EQ(cached_of(first_a), 0);
  ASSERT_EQ(cached_of(first_b), 0);
  expect_cold_bits(first_a, "server a, first");
  writes_settle(*a, "disk");
  writes_settle(b, "disk");

  const auto [cross_a, cross_b] = both(other, long_prompt());
  EXPECT_EQ(cached_of(cross_a), kOtherHit) << "a did not find b's records";
  EXPECT_EQ(cached_of(cross_b), kFullHit) << "b did not find a's records";
  EXPECT_EQ(logprob_entries(cross_a), logprob_entries(first_b)) << "a from b's records";
  expect_cold_bits(cross_b, "b from a's records");

  const std::vector<int32_t> same = prompt_make(6, 1000);
  const auto [same_a, same_b] = both(same, same);
  EXPECT_EQ(logprob_entries(same_a), logprob_entries(same_b));
  writes_settle(*a, "disk");
  writes_settle(b, "disk");
  for (ServeProcess* s : {a.get(), &b}) {
    const std::string m = metrics_of(*s);
    EXPECT_GT(tier_metric(m, "invar_cache_tier_writes_total", "disk"), 0) << s->log();
    EXPECT_GT(tier_metric(m, "invar_cache_tier_hits_total", "disk"), 0) << s->log();
    EXPECT_EQ(tier_metric(m, "invar_cache_tier_corrupt_total", "disk"), 0) << s->log();
    EXPECT_EQ(tier_metric(m, "invar_cache_tier_write_failures_total", "disk"), 0) << s->log();
    EXPECT_EQ(tier_metric(m, "invar_cache_tier_errors_total", "disk"), 0) << s->log();
  }
  ServeProcess c(serve_args({"--cache-dir", dir}), "tier_shared_c");
  ASSERT_NE(c.port(), 0) << c.log();
  const json third = complete(c, same, "");
  EXPECT_EQ(cached_of(third), kOtherHit) << "the records both wrote at once are not whole";
  EXPECT_EQ(logprob_entries(third), logprob_entries(same_a));
  EXPECT_EQ(tier_metric(metrics_of(c), "invar_cache_tier_corrupt_total", "disk"), 0);
}

int64_t proc_count(pid_t pid, const char* what) {
  if (std::string(what) == "fd") {
    int64_t n = 0;
    std::error_code ec;
    for ([[maybe_unused]] auto& e :
         fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec))
      ++n;
    return n;
  }
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
  return -1;
}

// Requests with random prefixes (a shared stem of 32 choices and a random tail) against small
// disk and Redis budgets: the budgets hold and the server's descriptors and memory level off.
TEST(TierServeSoak, BudgetsHoldWithoutGrowth) {
  const char* env = std::getenv("INVAR_TIER_SOAK_N");
  const int n = env ? std::atoi(env) : 150;
  invar::testing::RedisProcess redis("4mb");
  ASSERT_NE(redis.port(), 0) << redis.failure();
  const std::string dir = fresh_dir("soak");
  const int64_t dir_budget = 2 << 20;
  std::vector<std::string> extra = {
      "--cache-dir",   dir,         "--cache-dir-bytes",        std::to_string(dir_budget),
      "--cache-bytes", "4000000",   "--cache-tier-queue-bytes", "1000000",
      "--cache-redis", redis.url(), "--cache-tier-key",         tier_key()};
  ServeProcess s(serve_args(extra, 16), "tier_soak");
  ASSERT_NE(s.port(), 0) << s.log();
  std::mt19937 rng(11);
  int64_t fds = 0, rss = 0, hits = 0;
  for (int i = 0; i < n; ++i) {
    auto p = prompt_make(rng() % 32, 48 + rng() % 64);
    const auto tail = prompt_make(100000 + i, 1 + rng() % 40);
    p.insert(p.end(), tail.begin(), tail.end());
    const json r = complete(s, p, i % 3 == 0 ? "s" : "", 1, 0);
    hits += cached_of(r) > 0;
    if (i == n / 5) {
      writes_settle(s, "disk");
      fds = proc_count(s.pid(), "fd");
      rss = proc_count(s.pid(), "rss");
    }
  }
  writes_settle(s, "disk");
  const std::string m = metrics_of(s);
  EXPECT_GT(hits, 0);
  EXPECT_GT(tier_metric(m, "invar_cache_tier_evictions_total", "disk"), 0)
      << "the soak must overflow the disk budget";
  EXPECT_LE(tier_metric(m, "invar_cache_tier_bytes", "disk"), dir_budget);
  int64_t on_disk = 0;
  for (auto& f : files_with(dir, ".blk")) on_disk += static_cast<int64_t>(fs::file_size(f));
  EXPECT_LE(on_disk, dir_budget);
  const double writes = tier_metric(m, "invar_cache_tier_writes_total", "disk");
  const double commits = tier_metric(m, "invar_cache_tier_commits_total", "disk");
  EXPECT_GE(commits, 1);
  EXPECT_LE(commits, writes) << "a group commit stores at least one record";
  std::printf(
      "soak: %d requests, %lld hit; disk %.0f bytes (budget %lld), %.0f evictions, "
      "%.0f drops, %.2f records per commit; fds %lld -> %lld; rss %lld -> %lld KiB; redis "
      "used_memory %lld\n",
      n, static_cast<long long>(hits), tier_metric(m, "invar_cache_tier_bytes", "disk"),
      static_cast<long long>(dir_budget),
      tier_metric(m, "invar_cache_tier_evictions_total", "disk"),
      tier_metric(m, "invar_cache_tier_write_drops_total", "disk"), writes / commits,
      static_cast<long long>(fds), static_cast<long long>(proc_count(s.pid(), "fd")),
      static_cast<long long>(rss >> 10), static_cast<long long>(proc_count(s.pid(), "rss") >> 10),
      redis.info_field("memory", "used_memory"));
  EXPECT_LE(proc_count(s.pid(), "fd"), fds + 2) << "descriptors grew";
  if (!invar::test::kSanitizerBuild) {  // ASan's quarantine keeps freed memory resident
    EXPECT_LE(proc_count(s.pid(), "rss"), rss + (16 << 20)) << "memory grew";
  }
  EXPECT_GT(tier_metric(m, "invar_cache_tier_writes_total", "redis"), 0);
  EXPECT_LE(redis.info_field("memory", "used_memory"), (4ll << 20) + (64 << 10));
}

}  // namespace

}  // namespace tier_serve_test
