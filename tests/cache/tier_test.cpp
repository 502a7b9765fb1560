// The lower cache tiers without a model: the record format's checks, the disk tier's files,
// budget and restart, and the memory cache restored from disk and from a real redis-server
// (bits compared, salts kept apart, corrupt records skipped, counted and removed), plus a small
// budget soak. The soak test runs 10,000 prefixes when INVAR_TIER_SOAK_N says so (label soak).
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache/disk_tier.h"
#include "cache/lower_tiers.h"
#include "cache/prefix_cache.h"
#include "cache/redis_process.h"
#include "cache/redis_tier.h"
#include "cache/tier_bridge.h"
#include "cache/tier_files.h"
#include "cache/tier_record.h"
#include "cache/tier_secret.h"

namespace invar {
namespace tier_test {

namespace fs = std::filesystem;

constexpr int64_t kBs = 4;
constexpr int64_t kBlockFloats = 24;
constexpr int64_t kStateFloats = 40;

TierShape shape_make(int64_t block_floats = kBlockFloats) {
  return TierShape{"fp_test0123456789", kBs, block_floats, kStateFloats};
}

// One deployment's secret, as --cache-tier-key gives it.
const TierSecret& test_secret() {
  static const TierSecret s = [] {
    std::vector<unsigned char> master(32, 'k');
    return tier_secret_derive(master, "test");
  }();
  return s;
}

// Where the disk tier files the record of name `name` (disk_tier.h's layout).
std::string record_path(const std::string& dir, uint64_t name) {
  const std::string hex = tier_key_hex(name);
  return dir + "/fp_test0123456789/" + hex.substr(0, 2) + "/" + hex + ".blk";
}

// The name block `key` is filed under, as the tiers spell it.
std::string name_hex(uint64_t key) {
  return tier_key_hex(tier_record_name(test_secret(), key));
}

// A record as the tiers file it under `name`: encoded, then sealed.
void record_sealed(const TierShape& shape, const TierBlock& b, uint64_t name,
                   std::vector<char>& rec, const TierSecret& secret = test_secret()) {
  tier_record_encode(shape, b, rec);
  tier_record_seal(secret, name, rec);
}

// Opens a record read under `name` as the reader does.
RecordCheck record_open(const TierShape& shape, std::span<const char> rec, uint64_t name,
                        uint64_t key, uint64_t parent, std::span<const int32_t> tokens,
                        TierBlock& view, const TierSecret& secret = test_secret()) {
  static thread_local std::vector<char> plain;
  return tier_record_open(secret, shape, rec, name, key, parent, tokens, plain, view);
}

using testing::files_under;
using testing::tier_temp_dir;

int64_t open_fds() {
  int64_t n = 0;
  for ([[maybe_unused]] auto& e : fs::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

int64_t resident_bytes() {
  std::ifstream f("/proc/self/statm");
  int64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

// The "computation": KV and state are functions of the prefix (as the contract makes them).
float kv_value(uint64_t key, int64_t j) {
  return static_cast<float>((key >> 8) % 100003 + j);
}
float state_value(uint64_t key, int64_t j) {
  return static_cast<float>(key % 99991) - j;
}

// Drives a cache as the scheduler does: restore (when a bridge is given), lookup, hit, fill and
// commit every remaining full block with a checkpoint. Returns the tokens served from cache.
int64_t seq_run(PrefixCache& cache, TierBridge* bridge, const std::vector<int32_t>& tokens,
                const std::string& salt, std::vector<float>* restored_state = nullptr) {
  const auto n = static_cast<int64_t>(tokens.size());
  if (bridge) bridge->restore(tokens, salt, n - 1);
  const PrefixHit hit = cache.lookup(tokens, salt, n - 1);
  std::vector<float> state(kStateFloats);
  cache.hit_apply(hit, state.data());
  if (restored_state) *restored_state = state;
  std::vector<int32_t> table = hit.blocks;
  std::vector<uint64_t> keys;
  cache.chain_keys(tokens, salt, n / kBs, keys);
  for (int64_t i = static_cast<int64_t>(hit.blocks.size()); i < n / kBs; ++i) {
    const int32_t b = cache.block_acquire();
    EXPECT_GE(b, 0);
    if (b < 0) break;
    for (int64_t j = 0; j < kBlockFloats; ++j)
      cache.block_data(b)[j] = kv_value(keys[static_cast<size_t>(i) + 1], j);
    const int32_t c = cache.checkpoint_acquire();
    if (c >= 0)
      for (int64_t j = 0; j < kStateFloats; ++j)
        cache.checkpoint_data(c)[j] = state_value(keys[static_cast<size_t>(i) + 1], j);
    table.push_back(b);
    cache.block_commit(table, i, tokens, salt, c);
  }
  for (int32_t b : table) cache.block_release(b);
  cache.check_invariants();
  return hit.n_tokens;
}

// After a hit of n_tokens: every hit block's KV and the restored state are what computing them
// gives, bit for bit.
void expect_hit_bits(const PrefixCache& cache, const std::vector<int32_t>& tokens,
                     const std::string& salt, const std::vector<float>& state) {
  const auto n = static_cast<int64_t>(tokens.size());
  const PrefixHit hit = cache.lookup(tokens, salt, n - 1);
  ASSERT_GT(hit.n_tokens, 0);
  std::vector<uint64_t> keys;
  cache.chain_keys(tokens, salt, n / kBs, keys);
  for (size_t i = 0; i < hit.blocks.size(); ++i)
    for (int64_t j = 0; j < kBlockFloats; ++j)
      ASSERT_EQ(cache.block_data(hit.blocks[i])[j], kv_value(keys[i + 1], j)) << "block " << i;
  const uint64_t last = keys[hit.blocks.size()];
  for (int64_t j = 0; j < kStateFloats; ++j)
    ASSERT_EQ(state[static_cast<size_t>(j)], state_value(last, j));
}

CacheConfig cache_config(int64_t budget = 1 << 20) {
  return CacheConfig{.block_size = kBs,
                     .block_floats = kBlockFloats,
                     .state_floats = kStateFloats,
                     .cache_bytes = budget};
}

std::vector<int32_t> tokens_make(int seed, int64_t n) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng() % 1000);
  return t;
}

// A memory cache with lower tiers, as the engine builds it.
struct Tiered {
  PrefixCache cache;
  LowerTiers tiers;
  TierBridge bridge;
  Tiered(const TierConfig& tc, int64_t budget = 1 << 20, const TierSecret& secret = test_secret())
      : cache(cache_config(budget)), tiers(tc, shape_make(), secret), bridge(cache, tiers) {}
  const TierReport& tier(size_t i) {
    report = tiers.report();
    return report.tiers.at(i);
  }
  TiersReport report;
};

TEST(TierRecord, ChecksCatchEveryDamage) {
  const TierShape shape = shape_make();
  std::vector<int32_t> tokens = {1, 2, 3, 4};
  std::vector<float> kv(kBlockFloats, 1.5f), state(kStateFloats, -2.0f);
  TierBlock b{42, 7, tokens, kv, state, true, {}};
  std::vector<char> rec;
  record_sealed(shape, b, 1000, rec);
  ASSERT_EQ(static_cast<int64_t>(rec.size()), tier_record_bytes(shape, true));
  TierBlock got;
  ASSERT_EQ(record_open(shape, rec, 1000, 42, 7, tokens, got), RecordCheck::ok);
  EXPECT_TRUE(got.checkpoint);
  EXPECT_EQ(std::memcmp(got.kv.data(), kv.data(), kv.size() * 4), 0);
  EXPECT_EQ(std::memcmp(got.state.data(), state.data(), state.size() * 4), 0);
  for (size_t at = 0; at < rec.size(); at += 13) {  // any flipped byte
    auto bad = rec;
    bad[at] ^= 0x10;
    EXPECT_EQ(record_open(shape, bad, 1000, 42, 7, tokens, got), RecordCheck::corrupt) << at;
  }
  for (size_t len : {size_t{0}, size_t{100}, rec.size() - 1})  // truncated
    EXPECT_EQ(record_open(shape, std::span(rec.data(), len), 1000, 42, 7, tokens, got),
              RecordCheck::corrupt);
  TierShape other = shape;
  other.fingerprint = "fp_othermodel0000";  // a whole record of another model
  EXPECT_EQ(record_open(other, rec, 1000, 42, 7, tokens, got), RecordCheck::corrupt);
  EXPECT_EQ(record_open(shape, rec, 1000, 43, 7, tokens, got), RecordCheck::corrupt);
  EXPECT_EQ(record_open(shape, rec, 1000, 42, 8, tokens, got), RecordCheck::mismatch);
  std::vector<int32_t> other_tokens = {1, 2, 3, 5};
  EXPECT_EQ(record_open(shape, rec, 1000, 42, 7, other_tokens, got), RecordCheck::mismatch);
  TierBlock no_state{42, 7, tokens, kv, {}, false, {}};
  record_sealed(shape, no_state, 1000, rec);
  ASSERT_EQ(record_open(shape, rec, 1000, 42, 7, tokens, got), RecordCheck::ok);
  EXPECT_FALSE(got.checkpoint);
}

// What a writer of the tier without the key can do, tried: edit a record's bytes (its KV
// negated, or scaled by 1.001 — a different answer, were it believed), then reseal it as the
// unkeyed format did (XXH3 over the record) or with another key; move a whole record to another
// name; none opens. The names themselves are keyed: a key of another secret files elsewhere.
TEST(TierRecord, ForgeriesWithoutTheKeyAreRefused) {
  const TierShape shape = shape_make();
  std::vector<int32_t> tokens = {11, 12, 13, 14};
  std::vector<float> kv(kBlockFloats, 1.5f), state(kStateFloats, -2.0f);
  const TierBlock b{42, 7, tokens, kv, state, true, {}};
  const uint64_t name = tier_record_name(test_secret(), 42);
  std::vector<char> rec;
  record_sealed(shape, b, name, rec);
  TierBlock got;
  ASSERT_EQ(record_open(shape, rec, name, 42, 7, tokens, got), RecordCheck::ok);

  // The attacker's edit: the clear record (as an attacker who had the plaintext would write
  // it) with its KV changed, then "sealed" the old way (XXH3-64 over all but the last 8 bytes).
  for (const float factor : {-1.0f, 1.001f}) {
    std::vector<float> edited = kv;
    for (float& x : edited) x *= factor;
    std::vector<char> forged;
    tier_record_encode(shape, TierBlock{42, 7, tokens, edited, state, true, {}}, forged);
    const uint64_t sum = XXH3_64bits(forged.data(), forged.size() - 8);
    std::memcpy(forged.data() + forged.size() - 8, &sum, 8);
    EXPECT_EQ(record_open(shape, forged, name, 42, 7, tokens, got), RecordCheck::corrupt)
        << "resealed with the unkeyed checksum";
    // Sealed properly, but with a key of the attacker's own.
    const TierSecret theirs = tier_secret_derive(std::vector<unsigned char>(32, 'a'), "attacker");
    record_sealed(shape, TierBlock{42, 7, tokens, edited, state, true, {}}, name, forged, theirs);
    EXPECT_EQ(record_open(shape, forged, name, 42, 7, tokens, got), RecordCheck::corrupt)
        << "sealed with another key";
    EXPECT_NE(tier_record_name(theirs, 42), name) << "another key files under other names";
  }
  // A whole, honest record moved to another record's name.
  const uint64_t elsewhere = tier_record_name(test_secret(), 43);
  EXPECT_EQ(record_open(shape, rec, elsewhere, 42, 7, tokens, got), RecordCheck::corrupt);
  // Not a token id is readable: the record holds none of the block's bytes in clear, nor its
  // fingerprint.
  const std::string bytes(rec.begin(), rec.end());
  EXPECT_EQ(bytes.find(std::string(reinterpret_cast<const char*>(tokens.data()), 16)),
            std::string::npos);
  EXPECT_EQ(bytes.find(std::string(reinterpret_cast<const char*>(&tokens[1]), 4)),
            std::string::npos);
  EXPECT_EQ(bytes.find(shape.fingerprint), std::string::npos);
  // A value longer than any record of the shape is refused before anything is decrypted.
  std::vector<char> huge(static_cast<size_t>(tier_record_bytes_max(shape)) + 1, 'x');
  EXPECT_EQ(record_open(shape, huge, name, 42, 7, tokens, got), RecordCheck::corrupt);
}

// Chain keys are keyed: another secret gives other keys for the same salt and tokens, and two
// salts never share a first block's parent.
TEST(TierRecord, ChainKeysNeedTheSecret) {
  const auto tokens = tokens_make(5, 3 * kBs);
  CacheConfig a = cache_config(), b = cache_config();
  b.chain_secret = test_secret().chain;
  std::vector<uint64_t> ka, kb;
  PrefixCache(a).chain_keys(tokens, "s", 3, ka);
  PrefixCache(b).chain_keys(tokens, "s", 3, kb);
  ASSERT_EQ(ka.size(), kb.size());
  for (size_t i = 0; i < ka.size(); ++i) EXPECT_NE(ka[i], kb[i]) << i;
  PrefixCache c(b);
  EXPECT_NE(c.salt_key(""), c.salt_key("x"));
  EXPECT_EQ(c.salt_key("x"), PrefixCache(b).salt_key("x")) << "the same secret, the same key";
}

// A drafter's hidden rows ride after the state: a reader that wants them gets them, or an empty
// view from a record written without them; a reader that wants none skips them; rows of
// another size are foreign.
TEST(TierRecord, HiddenRowsAreOptional) {
  TierShape with = shape_make();
  with.hidden_floats = kBs * 3;
  const TierShape without = shape_make();
  std::vector<int32_t> tokens = {1, 2, 3, 4};
  std::vector<float> kv(kBlockFloats, 1.5f), state(kStateFloats, -2.0f), hidden(kBs * 3, 0.25f);
  TierBlock b{42, 7, tokens, kv, state, true, hidden};
  std::vector<char> rec;
  record_sealed(with, b, 9, rec);
  ASSERT_EQ(static_cast<int64_t>(rec.size()), tier_record_bytes(with, true, true));
  TierBlock got;
  ASSERT_EQ(record_open(with, rec, 9, 42, 7, tokens, got), RecordCheck::ok);
  ASSERT_EQ(got.hidden.size(), hidden.size());
  EXPECT_EQ(std::memcmp(got.hidden.data(), hidden.data(), hidden.size() * 4), 0);
  EXPECT_EQ(std::memcmp(got.state.data(), state.data(), state.size() * 4), 0);
  ASSERT_EQ(record_open(without, rec, 9, 42, 7, tokens, got), RecordCheck::ok);
  EXPECT_TRUE(got.hidden.empty());
  EXPECT_EQ(std::memcmp(got.kv.data(), kv.data(), kv.size() * 4), 0);
  TierShape other = with;
  other.hidden_floats = kBs * 2;
  EXPECT_EQ(record_open(other, rec, 9, 42, 7, tokens, got), RecordCheck::corrupt);
  for (size_t len : {rec.size() - 4, rec.size() - 12})  // truncated rows
    EXPECT_EQ(record_open(with, std::span(rec.data(), len), 9, 42, 7, tokens, got),
              RecordCheck::corrupt);
  TierBlock plain{42, 7, tokens, kv, {}, false, {}};
  record_sealed(without, plain, 9, rec);
  ASSERT_EQ(record_open(with, rec, 9, 42, 7, tokens, got), RecordCheck::ok);
  EXPECT_TRUE(got.hidden.empty()) << "a record without rows says so";
  EXPECT_FALSE(got.checkpoint);
}

TEST(TierRedisUrl, ParsesAndRefuses) {
  const RedisUrl u = redis_url_parse("redis://10.0.0.2:6380/3");
  EXPECT_EQ(u.host, "10.0.0.2");
  EXPECT_EQ(u.port, 6380);
  EXPECT_EQ(u.db, 3);
  EXPECT_FALSE(u.tls);
  EXPECT_TRUE(u.password.empty());
  EXPECT_EQ(redis_url_parse("redis://cache").port, 6379);
  const RedisUrl t = redis_url_parse("rediss://invar:p%40ss%3Aw@cache.local:6380/2");
  EXPECT_TRUE(t.tls);
  EXPECT_EQ(t.user, "invar");
  EXPECT_EQ(t.password, "p@ss:w");
  EXPECT_EQ(t.host, "cache.local");
  EXPECT_EQ(t.port, 6380);
  EXPECT_EQ(t.db, 2);
  const RedisUrl p = redis_url_parse("redis://:secret@[::1]:7000");
  EXPECT_TRUE(p.user.empty());
  EXPECT_EQ(p.password, "secret");
  EXPECT_EQ(p.host, "::1");
  EXPECT_EQ(p.port, 7000);
  for (const char* bad : {"http://x", "redis://", "redis://h:0", "redis://h:x", "redis://h/-1",
                          "redis://u@h", "redis://u:@h", "redis://:p%zz@h", "redis://[::1"})
    EXPECT_THROW(redis_url_parse(bad), Error) << bad;
  try {
    redis_url_parse("redis://user:hunter2@h:x");
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("hunter2"), std::string::npos) << e.what();
  }
}

TEST(TierDisk, BudgetLruRestartAndStaleTemporaries) {
  const std::string dir = tier_temp_dir("disk");
  const TierShape shape = shape_make();
  const int64_t rec_bytes = tier_record_bytes(shape, true);
  std::vector<int32_t> tokens = {1, 2, 3, 4};
  std::vector<float> kv(kBlockFloats, 3.0f), state(kStateFloats, 4.0f);
  std::vector<char> rec, back;
  {
    DiskTier d({dir, 5 * rec_bytes, shape.fingerprint, 0});
    for (uint64_t k = 1; k <= 10; ++k) {
      record_sealed(shape, TierBlock{k, 0, tokens, kv, state, true, {}}, k, rec);
      EXPECT_EQ(d.put(k, rec), TierPut::written);
      if (k == 9) {
        EXPECT_EQ(d.get(5, back), TierGet::found);  // 5, the oldest, becomes the newest
      }
    }
    EXPECT_EQ(d.put(10, rec), TierPut::present);
    EXPECT_LE(d.bytes_stored(), 5 * rec_bytes);
    EXPECT_EQ(d.counters.evictions.load(), 5);
    EXPECT_EQ(d.get(6, back), TierGet::missing) << "least recently used goes first";
    EXPECT_EQ(d.get(5, back), TierGet::found) << "a read refreshes recency";
    EXPECT_EQ(d.get(10, back), TierGet::found);
    EXPECT_EQ(static_cast<int64_t>(files_under(dir, ".blk").size()), 5);
  }
  // A writer that died mid-write left a temporary file; the next start removes it.
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::string tmp = dir + "/" + shape.fingerprint + "/tmp/0000000000000001." + host + "." +
                          std::to_string(dead) + ".0.tmp";
  std::ofstream(tmp) << "half a record";
  DiskTier again({dir, 5 * rec_bytes, shape.fingerprint, 0});
  EXPECT_EQ(again.files_known(), 5);
  EXPECT_EQ(again.bytes_stored(), 5 * rec_bytes);
  EXPECT_EQ(again.stale_temporaries_removed(), 1);
  EXPECT_FALSE(fs::exists(tmp));
  EXPECT_EQ(again.get(5, back), TierGet::found);
  TierBlock view;
  EXPECT_EQ(record_open(shape, back, 5, 5, 0, tokens, view), RecordCheck::ok);
  // A smaller budget at restart is kept at once.
  DiskTier smaller({dir, 2 * rec_bytes, shape.fingerprint, 0});
  EXPECT_EQ(smaller.files_known(), 2);
  EXPECT_EQ(static_cast<int64_t>(files_under(dir, ".blk").size()), 2);
  EXPECT_THROW(DiskTier({"/proc/invar-no-such-dir", 1, "fp", 0}), Error);
  fs::remove_all(dir);
}

// f() on a thread of its own, waited for at most a minute: a read that blocks for good fails the
// test instead of hanging it (the thread is left behind).
template <class F>
auto within_a_minute(F f) -> std::optional<decltype(f())> {
  auto done = std::make_shared<std::promise<decltype(f())>>();
  auto result = done->get_future();
  std::thread([done, f] { done->set_value(f()); }).detach();
  if (result.wait_for(std::chrono::minutes(1)) != std::future_status::ready) return std::nullopt;
  return result.get();
}

// What a writer of the directory can plant at a record's name: a FIFO (an open for reading
// would wait for a writer forever), a sparse file of a gigabyte (read whole, it would cost a
// gigabyte of memory), a link to another file. Each costs an open and an fstat: the read
// returns an empty record (the reader's check calls it corrupt), and a start removes them.
TEST(TierDisk, PlantedFifoSparseFileAndLinkAreNeverRead) {
  const std::string dir = tier_temp_dir("planted");
  const TierShape shape = shape_make();
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  const std::vector<float> kv(kBlockFloats, 3.0f), state(kStateFloats, 4.0f);
  std::vector<char> rec, back;
  tier_record_encode(shape, TierBlock{4, 0, tokens, kv, state, true, {}}, rec);
  const auto plant = [&] {
    fs::create_directories(fs::path(record_path(dir, 1)).parent_path());
    fs::create_directories(fs::path(record_path(dir, 2)).parent_path());
    fs::create_directories(fs::path(record_path(dir, 3)).parent_path());
    EXPECT_EQ(::mkfifo(record_path(dir, 1).c_str(), 0644), 0);
    const int fd = ::open(record_path(dir, 2).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::ftruncate(fd, int64_t(1) << 30), 0);
    ::close(fd);
    fs::create_symlink("/proc/self/status", record_path(dir, 3));
  };
  const DiskTierConfig cfg{dir, 1 << 20, shape.fingerprint, 0};
  DiskTierLimits limits;
  limits.shape = shape;
  {
    DiskTier d(cfg, limits);
    ASSERT_EQ(d.put(4, rec), TierPut::written);
    plant();
    for (uint64_t key : {1, 2, 3}) {
      back.assign(10, 'x');
      const auto got = within_a_minute([&] { return d.get(key, back); });
      ASSERT_TRUE(got) << key << ": the read blocked";
      EXPECT_EQ(*got, TierGet::found) << key;
      EXPECT_TRUE(back.empty()) << key;
      EXPECT_LT(back.capacity(), size_t(1) << 20) << "nothing of the planted file was read";
      TierBlock view;
      EXPECT_EQ(record_open(shape, back, key, key, 0, tokens, view), RecordCheck::corrupt);
    }
    EXPECT_EQ(d.get(4, back), TierGet::found);
    EXPECT_EQ(back.size(), rec.size());
    EXPECT_EQ(d.files_known(), 1);
    EXPECT_EQ(d.bytes_stored(), static_cast<int64_t>(rec.size()));
  }
  // A start indexes none of them, counts them corrupt and removes them.
  DiskTier again(cfg, limits);
  EXPECT_EQ(again.files_known(), 1);
  EXPECT_EQ(again.counters.corrupt.load(), 3);
  for (uint64_t key : {1, 2, 3})
    EXPECT_FALSE(fs::exists(fs::symlink_status(record_path(dir, key))));
  fs::remove_all(dir);
}

// Through the reader: a FIFO in the middle of a chain ends the restore there, is counted
// corrupt and removed, and the tiers shut down (the drain a SIGTERM runs) as usual.
TEST(TierBridge, FifoAtARecordNameCountedCorruptAndRemoved) {
  const std::string dir = tier_temp_dir("fifo");
  TierConfig tc;
  tc.cache_dir = dir;
  const auto tokens = tokens_make(3, 6 * kBs + 1);
  {
    Tiered a(tc);
    EXPECT_EQ(seq_run(a.cache, &a.bridge, tokens, "s"), 0);
    a.tiers.writes_wait();
    EXPECT_EQ(a.tier(0).writes, 6);
  }
  std::vector<uint64_t> keys;
  PrefixCache(cache_config()).chain_keys(tokens, "s", 6, keys);
  // block 3 (keys[0] is the salt's), under the name the tiers file it
  const std::string victim = record_path(dir, tier_record_name(test_secret(), keys[4]));
  // Planted after the start's scan (which removes such files too): the reader meets it.
  auto b = std::make_shared<Tiered>(tc);
  ASSERT_TRUE(fs::remove(victim));
  ASSERT_EQ(::mkfifo(victim.c_str(), 0644), 0);
  const auto hit = within_a_minute([b, &tokens] {
    const int64_t n = seq_run(b->cache, &b->bridge, tokens, "s");
    b->tiers.writes_wait();
    return n;
  });
  ASSERT_TRUE(hit) << "the tier reader blocked on the FIFO";
  EXPECT_EQ(*hit, 3 * kBs);
  EXPECT_EQ(b->tier(0).corrupt, 1);
  b.reset();  // the drain a SIGTERM runs
  struct stat st {};
  ASSERT_EQ(::lstat(victim.c_str(), &st), 0) << "the recomputed block is written again";
  EXPECT_TRUE(S_ISREG(st.st_mode));
  fs::remove_all(dir);
}

// A full filesystem: the write that meets it evicts the least recently used records and is
// tried again, so the newest block is stored (space_bytes stands in for the filesystem's size).
TEST(TierDisk, FullFilesystemEvictsAndRetries) {
  const std::string dir = tier_temp_dir("enospc");
  const TierShape shape = shape_make();
  const int64_t rec_bytes = tier_record_bytes(shape, true);
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  const std::vector<float> kv(kBlockFloats, 3.0f), state(kStateFloats, 4.0f);
  std::vector<char> rec, back;
  DiskTierLimits limits;
  limits.shape = shape;
  limits.space_bytes = 3 * rec_bytes;
  DiskTier d({dir, 100 * rec_bytes, shape.fingerprint, 0}, limits);
  for (uint64_t k = 1; k <= 5; ++k) {
    tier_record_encode(shape, TierBlock{k, 0, tokens, kv, state, true, {}}, rec);
    EXPECT_EQ(d.put(k, rec), TierPut::written) << k;
  }
  EXPECT_EQ(d.space_evictions(), 2);
  EXPECT_EQ(d.counters.evictions.load(), 2);
  EXPECT_EQ(d.get(1, back), TierGet::missing) << "the oldest made room";
  EXPECT_EQ(d.get(5, back), TierGet::found);
  EXPECT_LE(d.bytes_stored(), 3 * rec_bytes);
  EXPECT_TRUE(files_under(dir, ".tmp").empty());
  // A batch meets it too, record by record (its temporaries take space before they are named).
  std::vector<std::vector<char>> recs(3);
  std::vector<TierPutItem> items;
  for (uint64_t k = 10; k < 13; ++k) {
    tier_record_encode(shape, TierBlock{k, 0, tokens, kv, state, true, {}}, recs[k - 10]);
    items.push_back({k, recs[k - 10]});
  }
  std::vector<TierPut> results(items.size(), TierPut::failed);
  d.put_batch(items, results);
  for (TierPut r : results) EXPECT_EQ(r, TierPut::written);
  EXPECT_EQ(d.space_evictions(), 5);
  EXPECT_EQ(d.bytes_stored(), 3 * rec_bytes);
  fs::remove_all(dir);
}

// The same on a real full filesystem, where one can be made (root: a tmpfs of 256 KiB).
TEST(TierDisk, FullTmpfsEvictsAndRetries) {
  const std::string dir = tier_temp_dir("tmpfs");
  if (::geteuid() != 0 || ::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=256k") != 0) {
    fs::remove_all(dir);
    GTEST_SKIP() << "mounting a tmpfs needs root";
  }
  const TierShape shape = shape_make(10000);  // records of ~40 KB: six fit
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  const std::vector<float> kv(10000, 3.0f), state(kStateFloats, 4.0f);
  std::vector<char> rec, back;
  DiskTierLimits limits;
  limits.shape = shape;
  {
    DiskTier d({dir, 1 << 30, shape.fingerprint, 0}, limits);
    for (uint64_t k = 1; k <= 20; ++k) {
      tier_record_encode(shape, TierBlock{k, 0, tokens, kv, state, true, {}}, rec);
      EXPECT_EQ(d.put(k, rec), TierPut::written) << k;
    }
    EXPECT_GT(d.space_evictions(), 0);
    EXPECT_EQ(d.get(1, back), TierGet::missing);
    EXPECT_EQ(d.get(20, back), TierGet::found);
    EXPECT_EQ(back, rec);
  }
  ::umount2(dir.c_str(), MNT_DETACH);
  fs::remove_all(dir);
}

TEST(TierBridge, DiskRestoresAfterRestartSaltsApartCorruptSkipped) {
  const std::string dir = tier_temp_dir("bridge");
  TierConfig tc;
  tc.cache_dir = dir;
  const auto tokens = tokens_make(1, 10 * kBs + 3);
  {
    Tiered a(tc);
    EXPECT_EQ(seq_run(a.cache, &a.bridge, tokens, "s1"), 0);
    a.tiers.writes_wait();
    EXPECT_EQ(a.tier(0).writes, 10);
    EXPECT_EQ(seq_run(a.cache, &a.bridge, tokens, "s1"), 10 * kBs) << "memory serves it";
    EXPECT_EQ(a.tier(0).hits, 0) << "memory hits never read the disk";
  }
  {
    Tiered b(tc);  // a restart: empty memory, the same directory
    std::vector<float> state;
    EXPECT_EQ(seq_run(b.cache, &b.bridge, tokens, "s1", &state), 10 * kBs);
    expect_hit_bits(b.cache, tokens, "s1", state);
    EXPECT_EQ(b.tier(0).hits, 10);
    EXPECT_EQ(b.bridge.restored_tokens(), 10 * kBs);
    b.tiers.writes_wait();
    EXPECT_EQ(b.tier(0).writes, 0) << "restored blocks are not written back";
    EXPECT_EQ(seq_run(b.cache, &b.bridge, tokens, "s2"), 0) << "another salt shares nothing";
    EXPECT_EQ(b.tier(0).hits, 10);
  }
  // Damage block 6's file: the restore stops before it, counts it and removes the file.
  std::vector<uint64_t> keys;
  PrefixCache(cache_config()).chain_keys(tokens, "s1", 10, keys);
  const std::string victim = record_path(dir, tier_record_name(test_secret(), keys[7]));
  ASSERT_TRUE(fs::exists(victim));
  const auto read_all = [](const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  const std::string intact = read_all(victim);
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put(static_cast<char>(intact.at(200) ^ 0x7f));
  }
  {
    Tiered c(tc);
    EXPECT_EQ(seq_run(c.cache, &c.bridge, tokens, "s1"), 6 * kBs);
    EXPECT_EQ(c.tier(0).corrupt, 1);
    // The damaged file is removed at once, and the recomputed block is written again by the
    // background writer, which may already have run: so the check is on what the file holds
    // once the writes are done, the intact record again, not on its absence in between.
    c.tiers.writes_wait();
    EXPECT_EQ(c.tier(0).writes, 1) << "the removed record is written again, the others stay";
    // Sealed afresh (a new nonce): whole again, not the same bytes; the next run opens it.
    const std::string rewritten = read_all(victim);
    EXPECT_EQ(rewritten.size(), intact.size()) << "the damaged record is replaced, not kept";
    EXPECT_NE(rewritten, intact);
  }
  {
    Tiered d(tc);
    std::vector<float> state;
    EXPECT_EQ(seq_run(d.cache, &d.bridge, tokens, "s1", &state), 10 * kBs);
    expect_hit_bits(d.cache, tokens, "s1", state);
    EXPECT_EQ(d.tier(0).corrupt, 0);
  }
  fs::remove_all(dir);
}

TEST(TierBridge, RedisSharesBetweenCachesAndFillsTheDisk) {
  testing::RedisProcess redis;
  ASSERT_NE(redis.port(), 0) << redis.failure();
  TierConfig tc;
  tc.redis_url = redis.url();
  tc.read_timeout_s = 5;
  const auto tokens = tokens_make(2, 8 * kBs + 1);
  Tiered a(tc);
  EXPECT_EQ(seq_run(a.cache, &a.bridge, tokens, "t"), 0);
  a.tiers.writes_wait();
  EXPECT_EQ(a.tier(0).writes, 8);
  EXPECT_EQ(redis.command({"DBSIZE"}), "8");
  const std::string keys = redis.command({"KEYS", "*"});
  EXPECT_NE(keys.find("invar:fp_test0123456789:"), std::string::npos) << keys;

  Tiered b(tc);  // another replica
  std::vector<float> state;
  EXPECT_EQ(seq_run(b.cache, &b.bridge, tokens, "t", &state), 8 * kBs);
  expect_hit_bits(b.cache, tokens, "t", state);
  EXPECT_EQ(b.tier(0).hits, 8);
  EXPECT_EQ(seq_run(b.cache, &b.bridge, tokens, "u"), 0) << "salt isolation through Redis";

  // A replica with a disk tier too: Redis fills it, and the next restart reads the disk.
  const std::string dir = tier_temp_dir("redis-disk");
  TierConfig both = tc;
  both.cache_dir = dir;
  {
    Tiered c(both);
    EXPECT_EQ(seq_run(c.cache, &c.bridge, tokens, "t"), 8 * kBs);
    c.tiers.writes_wait();
    EXPECT_EQ(c.tier(0).writes, 8) << "disk filled from Redis";
    EXPECT_EQ(c.tier(1).hits, 8);
  }
  {
    Tiered d(both);
    EXPECT_EQ(seq_run(d.cache, &d.bridge, tokens, "t"), 8 * kBs);
    EXPECT_EQ(d.tier(0).hits, 8);
    EXPECT_EQ(d.tier(1).hits, 0);
  }

  // A damaged value in Redis is skipped, counted and deleted.
  std::vector<uint64_t> ck;
  PrefixCache(cache_config()).chain_keys(tokens, "t", 8, ck);
  const std::string key = "invar:fp_test0123456789:" + name_hex(ck[4]);
  const std::string whole = redis.command({"GET", key});
  ASSERT_FALSE(whole.empty());
  std::string damaged = whole;
  damaged[damaged.size() / 2] ^= 1;
  redis.command({"SET", key, damaged});
  Tiered e(tc);
  EXPECT_EQ(seq_run(e.cache, &e.bridge, tokens, "t"), 3 * kBs);
  EXPECT_EQ(e.tier(0).corrupt, 1);
  e.tiers.writes_wait();
  const std::string rewritten = redis.command({"GET", key});
  EXPECT_EQ(rewritten.size(), whole.size()) << "removed, then written again whole";
  EXPECT_NE(rewritten, damaged);
  Tiered f(tc);
  EXPECT_EQ(seq_run(f.cache, &f.bridge, tokens, "t"), 8 * kBs) << "the rewritten record opens";
  fs::remove_all(dir);
}

// Redis as a deployment runs it: a password (AUTH) and TLS with a self-signed certificate the
// tier is told to trust. Records round-trip between two caches; a wrong password, no password,
// and an untrusted certificate each fail with the reason in the log (and the request is
// computed); a value far longer than any record is refused unread, counted and deleted.
TEST(TierBridge, RedisWithPasswordAndTls) {
  const std::string dir = tier_temp_dir("tls");
  ASSERT_TRUE(testing::tls_files_make(dir)) << "openssl could not make a certificate";
  testing::RedisProcess redis("64mb", "s3cret", dir);
  ASSERT_NE(redis.port(), 0) << "redis-server with TLS: " << redis.failure();
  std::mutex mu;
  std::vector<std::string> lines;
  TierConfig tc;
  tc.redis_url = "rediss://:s3cret@127.0.0.1:" + std::to_string(redis.tls_port());
  tc.redis_ca_file = dir + "/cert.pem";
  tc.read_timeout_s = 5;
  tc.log = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    lines.push_back(line);
  };
  const auto tokens = tokens_make(6, 5 * kBs + 1);
  {
    Tiered a(tc);
    EXPECT_NE(a.tiers.describe().find("rediss default@127.0.0.1"), std::string::npos)
        << a.tiers.describe();
    EXPECT_EQ(a.tiers.describe().find("s3cret"), std::string::npos) << "the password is shown";
    EXPECT_EQ(seq_run(a.cache, &a.bridge, tokens, "t"), 0);
    a.tiers.writes_wait();
    EXPECT_EQ(a.tier(0).writes, 5);
    EXPECT_EQ(redis.command({"DBSIZE"}), "5");
    Tiered b(tc);
    std::vector<float> state;
    EXPECT_EQ(seq_run(b.cache, &b.bridge, tokens, "t", &state), 5 * kBs);
    expect_hit_bits(b.cache, tokens, "t", state);
    EXPECT_EQ(b.tier(0).hits, 5);
  }
  EXPECT_TRUE(lines.empty()) << lines.front();
  const auto failure_logged = [&](const TierConfig& bad, const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(mu);
      lines.clear();
    }
    Tiered t(bad);
    EXPECT_EQ(seq_run(t.cache, &t.bridge, tokens, "t"), 0) << why;
    t.tiers.writes_wait();
    EXPECT_GT(t.tier(0).write_failures, 0) << why;
    EXPECT_EQ(t.tier(0).hits, 0) << why;
    std::lock_guard<std::mutex> lock(mu);
    std::string all;
    for (const auto& l : lines) all += l + "\n";
    EXPECT_NE(all.find(why), std::string::npos) << all;
  };
  TierConfig wrong = tc;
  wrong.redis_url = "rediss://:guess@127.0.0.1:" + std::to_string(redis.tls_port());
  failure_logged(wrong, "AUTH: WRONGPASS");
  TierConfig none = tc;
  none.redis_url = "redis://127.0.0.1:" + std::to_string(redis.port());
  none.redis_ca_file.clear();
  failure_logged(none, "NOAUTH");
  TierConfig untrusted = tc;
  untrusted.redis_ca_file.clear();  // the system's CAs do not sign this certificate
  failure_logged(untrusted, "certificate");

  // A 3 MiB value planted under the first block's name: refused without being read whole.
  std::vector<uint64_t> ck;
  PrefixCache(cache_config()).chain_keys(tokens, "t", 5, ck);
  const std::string key = "invar:fp_test0123456789:" + name_hex(ck[1]);
  redis.command({"SET", key, std::string(3 << 20, 'x')});
  Tiered c(tc);
  EXPECT_EQ(seq_run(c.cache, &c.bridge, tokens, "t"), 0);
  EXPECT_EQ(c.tier(0).corrupt, 1);
  c.tiers.writes_wait();
  EXPECT_EQ(redis.command({"STRLEN", key}), std::to_string(tier_record_bytes(shape_make(), true)))
      << "the planted value is deleted and the block written whole";
  fs::remove_all(dir);
}

// The attack the unkeyed scheme allowed: chain keys computed offline from the victim's prompt
// (XXH3 with its public seeds), records planted under them in the disk tier. The keyed names
// never meet them: the victim's request finds nothing, reads nothing, and computes.
TEST(TierBridge, RecordsPlantedUnderOfflineKeysAreNeverRead) {
  const std::string dir = tier_temp_dir("planted");
  TierConfig tc;
  tc.cache_dir = dir;
  const auto victim = tokens_make(7, 6 * kBs + 1);
  const auto attacker = tokens_make(8, 6 * kBs + 1);
  {
    Tiered a(tc);  // the attacker's own request fills the tier with honest records
    EXPECT_EQ(seq_run(a.cache, &a.bridge, attacker, ""), 0);
    a.tiers.writes_wait();
  }
  const auto honest = files_under(dir, ".blk");
  ASSERT_EQ(honest.size(), 6u);
  // The old scheme's chain: salt key XXH3(salt, "invar"), then XXH3(tokens, parent).
  uint64_t parent = XXH3_64bits_withSeed("", 0, 0x696e766172ull);
  int64_t planted = 0;
  for (int64_t i = 0; i < 6; ++i) {
    parent = XXH3_64bits_withSeed(victim.data() + i * kBs, kBs * sizeof(int32_t), parent);
    const std::string path = record_path(dir, parent);
    fs::create_directories(fs::path(path).parent_path());
    fs::copy_file(honest[static_cast<size_t>(i)], path, fs::copy_options::overwrite_existing);
    ++planted;
  }
  ASSERT_EQ(files_under(dir, ".blk").size(), 12u);
  Tiered v(tc);
  EXPECT_EQ(seq_run(v.cache, &v.bridge, victim, ""), 0) << "the victim was served a planted block";
  EXPECT_EQ(v.tier(0).hits, 0);
  EXPECT_EQ(v.tier(0).corrupt, 0) << "the planted names are not even looked up";
  EXPECT_EQ(planted, 6);
  fs::remove_all(dir);
}

// Rotation: a process with a new key neither finds nor trusts the old key's records; they are
// recomputed and filed under the new names beside the old, which age out of the budget.
TEST(TierBridge, ANewKeyIgnoresTheOldRecords) {
  const std::string dir = tier_temp_dir("rotate");
  TierConfig tc;
  tc.cache_dir = dir;
  const auto tokens = tokens_make(9, 4 * kBs + 1);
  {
    Tiered a(tc);
    EXPECT_EQ(seq_run(a.cache, &a.bridge, tokens, ""), 0);
    a.tiers.writes_wait();
    EXPECT_EQ(a.tier(0).writes, 4);
  }
  const TierSecret rotated = tier_secret_derive(std::vector<unsigned char>(32, 'r'), "rotated");
  Tiered b(tc, 1 << 20, rotated);
  EXPECT_EQ(seq_run(b.cache, &b.bridge, tokens, ""), 0);
  EXPECT_EQ(b.tier(0).hits, 0);
  EXPECT_EQ(b.tier(0).corrupt, 0) << "the old names are not looked up";
  b.tiers.writes_wait();
  EXPECT_EQ(b.tier(0).writes, 4) << "recomputed blocks filed under the new names";
  EXPECT_EQ(files_under(dir, ".blk").size(), 8u);
  fs::remove_all(dir);
}

// A lone --cache-dir makes its key once: a second process, and a restart, read the same one.
TEST(TierSecret, DirectoryKeyIsMadeOnceAndKept) {
  const std::string dir = tier_temp_dir("dirkey");
  const TierSecret a = tier_secret_for_dir(dir), b = tier_secret_for_dir(dir);
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.seal, b.seal);
  EXPECT_EQ(fs::status(dir + "/tier.key").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_NE(tier_secret_random().id, tier_secret_random().id);
  // A key file others may write is refused, as is a short one.
  const std::string loose = dir + "/loose.key";
  std::ofstream(loose) << std::string(64, 'a');
  fs::permissions(loose, fs::perms::owner_all | fs::perms::group_write);
  EXPECT_THROW(tier_secret_load(loose), Error);
  const std::string shorty = dir + "/short.key";
  std::ofstream(shorty) << "tooshort";
  fs::permissions(shorty, fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_THROW(tier_secret_load(shorty), Error);
  TierConfig redis_only;
  redis_only.redis_url = "redis://127.0.0.1:1";
  EXPECT_THROW(tier_secret_resolve(redis_only), Error) << "--cache-redis needs --cache-tier-key";
  fs::remove_all(dir);
}

TEST(TierBridge, UnreachableRedisFallsBackToRecomputation) {
  TierConfig tc;
  tc.redis_url = "redis://127.0.0.1:1";  // nothing listens on port 1
  tc.redis_timeout_s = 0.2;
  Tiered a(tc);
  const auto tokens = tokens_make(3, 6 * kBs);
  EXPECT_EQ(seq_run(a.cache, &a.bridge, tokens, ""), 0);
  a.tiers.writes_wait();
  EXPECT_EQ(a.tier(0).writes, 0);
  EXPECT_GT(a.tier(0).write_failures, 0);
  EXPECT_EQ(seq_run(a.cache, &a.bridge, tokens, ""), 5 * kBs) << "memory still serves";
}

// A tier that fails logs once when it starts failing and once when it works again, whatever
// the number of requests in between; the first corrupt record once. Redis crashes and comes back
// empty on the same port.
TEST(TierBridge, FailuresAreLoggedOncePerEpisode) {
  testing::RedisProcess redis;
  ASSERT_NE(redis.port(), 0) << redis.failure();
  std::mutex mu;
  std::vector<std::string> lines;
  TierConfig tc;
  tc.redis_url = redis.url();
  tc.redis_timeout_s = 0.5;
  tc.read_timeout_s = 5;
  tc.log = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    lines.push_back(line);
  };
  const auto count = [&](const std::string& part) {
    std::lock_guard<std::mutex> lock(mu);
    return std::count_if(lines.begin(), lines.end(),
                         [&](const std::string& l) { return l.find(part) != std::string::npos; });
  };
  Tiered a(tc);
  EXPECT_EQ(seq_run(a.cache, &a.bridge, tokens_make(10, 6 * kBs), ""), 0);
  a.tiers.writes_wait();
  EXPECT_EQ(a.tier(0).writes, 6);
  EXPECT_TRUE(lines.empty()) << lines.front();

  redis.stop();
  for (int i = 0; i < 5; ++i) seq_run(a.cache, &a.bridge, tokens_make(20 + i, 6 * kBs), "");
  a.tiers.writes_wait();
  EXPECT_GE(a.tier(0).errors, 5);
  EXPECT_GE(a.tier(0).write_failures, 25);
  EXPECT_EQ(count("cache tier redis: a read failed ("), 1);
  EXPECT_EQ(count("cache tier redis: a write failed ("), 1);
  EXPECT_EQ(count("succeed again"), 0);

  ASSERT_TRUE(redis.restart());
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // the reconnect interval
  for (int i = 0; i < 3; ++i) seq_run(a.cache, &a.bridge, tokens_make(30 + i, 6 * kBs), "");
  a.tiers.writes_wait();
  EXPECT_EQ(count("cache tier redis: reads succeed again after "), 1);
  EXPECT_EQ(count("cache tier redis: writes succeed again after "), 1);
  EXPECT_EQ(count("failed ("), 2) << "no new failure episode";

  std::vector<uint64_t> ck;
  const auto tokens = tokens_make(30, 6 * kBs);
  PrefixCache(cache_config()).chain_keys(tokens, "", 6, ck);
  const std::string key = "invar:fp_test0123456789:" + name_hex(ck[1]);
  std::string damaged = redis.command({"GET", key});
  ASSERT_FALSE(damaged.empty());
  damaged[damaged.size() / 2] ^= 1;
  redis.command({"SET", key, damaged});
  for (int i = 0; i < 3; ++i) {
    Tiered b(tc);  // a fresh replica reads the damaged record: met once, removed, logged once
    seq_run(b.cache, &b.bridge, tokens, "");
    b.tiers.writes_wait();
  }
  EXPECT_EQ(count("cache tier redis: record " + name_hex(ck[1]) + " is truncated"), 1);
  EXPECT_EQ(count("is truncated"), 1);
}

// A Redis that accepts connections and never answers: the lookup gives up at the read timeout
// (counted as one, not as a failed Redis command, which only its 1.5 s timeout would end), and
// the request is computed.
TEST(TierBridge, SilentTierCostsAtMostTheReadTimeout) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 16), 0);  // the kernel completes connections; nobody reads them
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  TierConfig tc;
  tc.redis_url = "redis://127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  tc.redis_timeout_s = 1.5;
  tc.read_timeout_s = 0.1;
  Tiered t(tc);  // its first command timed out: reconnects are allowed a second later
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  const auto tokens = tokens_make(4, 6 * kBs);
  EXPECT_EQ(seq_run(t.cache, &t.bridge, tokens, ""), 0);
  EXPECT_EQ(t.tiers.report().read_timeouts, 1) << "the engine waited for the silent tier";
  EXPECT_EQ(seq_run(t.cache, &t.bridge, tokens, ""), 5 * kBs) << "memory serves it";
  ::close(fd);
}

// Two processes' worth of writers filing the same keys in one directory while a reader reads
// them: every record a reader sees is whole, and the directory ends with one file per key.
TEST(TierDisk, SharedDirectoryWritersAndReaders) {
  const std::string dir = tier_temp_dir("shared");
  const TierShape shape = shape_make();
  DiskTier w1({dir, 1 << 30, shape.fingerprint, 0}), w2({dir, 1 << 30, shape.fingerprint, 0});
  DiskTier r({dir, 1 << 30, shape.fingerprint, 0});
  constexpr uint64_t kKeys = 40;
  std::atomic<bool> done{false};
  std::atomic<int64_t> seen{0}, bad{0};
  auto writer = [&](DiskTier& d) {
    std::vector<char> rec;
    for (uint64_t k = 1; k <= kKeys; ++k) {
      std::vector<int32_t> tokens(kBs, static_cast<int32_t>(k));
      std::vector<float> kv(kBlockFloats, static_cast<float>(k)), st(kStateFloats, 1.0f);
      record_sealed(shape, TierBlock{k, 0, tokens, kv, st, true, {}}, k, rec);
      EXPECT_NE(d.put(k, rec), TierPut::failed);
    }
  };
  std::thread reader([&] {
    std::vector<char> back;
    TierBlock view;
    while (!done) {
      for (uint64_t k = 1; k <= kKeys; ++k) {
        if (r.get(k, back) != TierGet::found) continue;
        ++seen;
        std::vector<int32_t> tokens(kBs, static_cast<int32_t>(k));
        bad += record_open(shape, back, k, k, 0, tokens, view) != RecordCheck::ok;
      }
    }
  });
  std::thread a(writer, std::ref(w1)), b(writer, std::ref(w2));
  a.join();
  b.join();
  done = true;
  reader.join();
  EXPECT_EQ(bad.load(), 0) << "a reader saw a partial record";
  EXPECT_GT(seen.load(), 0);
  EXPECT_EQ(files_under(dir, ".blk").size(), kKeys);
  EXPECT_TRUE(files_under(dir, ".tmp").empty());
  EXPECT_EQ(w1.counters.corrupt.load() + r.counters.corrupt.load(), 0);
  fs::remove_all(dir);
}

// Random prefixes under small disk and Redis budgets: both hold, descriptors do not grow.
TEST(TierSoak, BudgetsHoldWithoutDescriptorGrowth) {
  testing::RedisProcess redis("3mb");
  ASSERT_NE(redis.port(), 0) << redis.failure();
  const char* env = std::getenv("INVAR_TIER_SOAK_N");
  const int n = env ? std::atoi(env) : 40;
  const std::string dir = tier_temp_dir("soak");
  TierConfig tc;
  tc.cache_dir = dir;
  tc.cache_dir_bytes = 40 * tier_record_bytes(shape_make(), true);
  tc.redis_url = redis.url();
  tc.read_timeout_s = 5;
  tc.write_queue_bytes = 64 << 10;  // a writer that falls behind drops records (fsync is slow)
  Tiered t(tc, 30 * PrefixCache::budget_plan(cache_config()).block_bytes());
  std::mt19937 rng(9);
  int64_t fds_early = 0, rss_early = 0, hits = 0;
  for (int i = 0; i < n; ++i) {
    // Prefixes share a stem of 64 choices, so some come back from the tiers.
    auto tokens = tokens_make(static_cast<int>(rng() % 64), 6 * kBs);
    const auto tail = tokens_make(i + 1000, static_cast<int64_t>(rng() % 12) + 1);
    tokens.insert(tokens.end(), tail.begin(), tail.end());
    hits += seq_run(t.cache, &t.bridge, tokens, "soak") > 0;
    ASSERT_LE(t.tier(0).bytes, tc.cache_dir_bytes);
    if (i == n / 10) {
      fds_early = open_fds();
      rss_early = resident_bytes();
    }
  }
  t.tiers.writes_wait();
  EXPECT_GT(hits, 0);
  EXPECT_GT(t.tier(0).evictions, 0) << "the soak must overflow the disk budget";
  int64_t on_disk = 0;
  for (auto& f : files_under(dir, ".blk")) on_disk += static_cast<int64_t>(fs::file_size(f));
  EXPECT_LE(on_disk, tc.cache_dir_bytes);
  EXPECT_LE(open_fds(), fds_early + 2);
  EXPECT_LE(resident_bytes(), rss_early + (8 << 20)) << "memory grew during the soak";
  EXPECT_GT(t.tier(1).writes, 0);
  // Redis evicts before each command, so it may pass maxmemory by about one record.
  EXPECT_LE(redis.info_field("memory", "used_memory"), (3ll << 20) + (64 << 10));
  fs::remove_all(dir);
}

}  // namespace tier_test
}  // namespace invar
