// Prefix-cache bookkeeping without a model (STYLE 7): hash chain, salt isolation, token
// verification, the checkpoint ⇒ KV-prefix invariant under eviction, the byte budget and what
// it counts, and tables that shrink with their use without changing a bit.
#include "cache/prefix_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "sanitizer_build.h"

namespace invar {
namespace prefix_cache_test {

constexpr int64_t kBs = 4;                 // tokens per block
constexpr int64_t kBlockFloats = 8;        // 32 bytes → one 64-byte slot
constexpr int64_t kStateFloats = 40;       // 160 bytes → 192-byte slot
constexpr int64_t kStateFloatsMax = 1024;  // what a FakeSeq's state holds (tests may raise it)

CacheConfig config_make(int64_t budget) {
  CacheConfig c;
  c.block_size = kBs;
  c.block_floats = kBlockFloats;
  c.state_floats = kStateFloats;
  c.cache_bytes = budget;
  return c;
}

// What one block and one checkpoint are charged: slot + bookkeeping.
const int64_t kBlockBytes = PrefixCache::budget_plan(config_make(0)).block_bytes();
const int64_t kCheckpointBytes = PrefixCache::budget_plan(config_make(0)).checkpoint_bytes();

// A sequence as the engine drives it: blocks filled in order, each committed when full with
// a checkpoint whose contents encode (sequence tag, block index) so restores can be checked.
struct FakeSeq {
  std::vector<int32_t> tokens;
  std::vector<int32_t> blocks;
  std::string salt;
  float state[kStateFloatsMax] = {};
  int64_t cached = 0;
};

// What a slot holds after a prefix: any deterministic function of the prefix tokens (the first
// n_tokens of them), different for KV and state, so that serving a block or a checkpoint of
// another prefix, or losing one's bits in a move, shows.
float prefix_tag(const std::vector<int32_t>& tokens, int64_t n_tokens, uint64_t seed) {
  n_tokens = std::min<int64_t>(n_tokens, static_cast<int64_t>(tokens.size()));
  const uint64_t h = PrefixCache::block_key(seed, std::span(tokens.data(), size_t(n_tokens)));
  return static_cast<float>(h % 1000003);
}
float state_tag(const std::vector<int32_t>& tokens, int64_t n_blocks) {
  return prefix_tag(tokens, n_blocks * kBs, 7);
}
float kv_tag(const std::vector<int32_t>& tokens, int64_t block) {
  return prefix_tag(tokens, (block + 1) * kBs, 11);
}

// A slot's pattern: tag, tag + 1, ... (exact in float below 2^24).
void pattern_write(float* p, int64_t n, float tag) {
  for (int64_t j = 0; j < n; ++j) p[j] = tag + static_cast<float>(j);
}
bool pattern_holds(const float* p, int64_t n, float tag) {
  for (int64_t j = 0; j < n; ++j)
    if (p[j] != tag + static_cast<float>(j)) return false;
  return true;
}

// Called after every operation of seq_run() and seq_release(), once the invariants hold.
using AfterOp = std::function<void()>;

// Runs a sequence to completion: lookup, apply, compute (fake) every remaining block, commit.
// Returns false if the budget could not hold it.
bool seq_run(PrefixCache& cache, FakeSeq& s, bool checkpoints = true, const AfterOp& after = {}) {
  auto checked = [&] {
    cache.check_invariants();
    if (after) after();
  };
  const int64_t n = static_cast<int64_t>(s.tokens.size());
  const int64_t kv_floats = cache.config().block_floats, state_floats = cache.config().state_floats;
  EXPECT_LE(state_floats, kStateFloatsMax);
  const PrefixHit hit = cache.lookup(s.tokens, s.salt, n - 1);
  cache.hit_apply(hit, s.state);
  checked();
  s.cached = hit.n_tokens;
  s.blocks = hit.blocks;
  if (hit.n_tokens > 0) {
    EXPECT_TRUE(pattern_holds(s.state, state_floats, state_tag(s.tokens, hit.n_tokens / kBs)))
        << "restored the wrong state";
    for (size_t i = 0; i < hit.blocks.size(); ++i)
      EXPECT_TRUE(pattern_holds(cache.block_data(hit.blocks[i]), kv_floats,
                                kv_tag(s.tokens, static_cast<int64_t>(i))))
          << "block " << i << " of the hit holds another prefix's KV";
  }
  for (int64_t i = static_cast<int64_t>(s.blocks.size()); i * kBs < n; ++i) {
    const int32_t b = cache.block_acquire();
    checked();
    if (b < 0) return false;
    s.blocks.push_back(b);
    pattern_write(cache.block_data(b), kv_floats, kv_tag(s.tokens, i));
    if ((i + 1) * kBs > n) break;  // partial tail block: never indexed
    const int32_t c = checkpoints ? cache.checkpoint_acquire() : -1;
    if (c >= 0) pattern_write(cache.checkpoint_data(c), state_floats, state_tag(s.tokens, i + 1));
    cache.block_commit(s.blocks, i, s.tokens, s.salt, c);
    checked();
  }
  return true;
}

void seq_release(PrefixCache& cache, FakeSeq& s, const AfterOp& after = {}) {
  for (int32_t b : s.blocks) {
    cache.block_release(b);
    cache.check_invariants();
    if (after) after();
  }
  s.blocks.clear();
}

std::vector<int32_t> tokens_make(std::initializer_list<std::pair<int32_t, int64_t>> runs) {
  std::vector<int32_t> t;
  for (auto [base, n] : runs)
    for (int64_t i = 0; i < n; ++i) t.push_back(base + static_cast<int32_t>(i));
  return t;
}

TEST(PrefixCache, HashChainDependsOnParentAndTokens) {
  const std::vector<int32_t> a = {1, 2, 3, 4}, b = {1, 2, 3, 5};
  EXPECT_NE(PrefixCache::block_key(1, a), PrefixCache::block_key(2, a));
  EXPECT_NE(PrefixCache::block_key(1, a), PrefixCache::block_key(1, b));
  EXPECT_EQ(PrefixCache::block_key(1, a), PrefixCache::block_key(1, a));
  CacheConfig cc;
  cc.block_size = 4;
  cc.cache_bytes = 1 << 16;
  const PrefixCache cache(cc);
  EXPECT_NE(cache.salt_key(""), cache.salt_key("x"));
}

TEST(PrefixCache, HitIsLongestRunEndingAtCheckpointAndLeavesOneToken) {
  PrefixCache cache(config_make(1 << 20));
  FakeSeq a;
  a.tokens = tokens_make({{10, 12}});  // exactly 3 blocks
  ASSERT_TRUE(seq_run(cache, a));
  EXPECT_EQ(a.cached, 0);
  seq_release(cache, a);

  FakeSeq b;
  b.tokens = a.tokens;  // identical: the cap keeps the last token to recompute → 2 blocks
  ASSERT_TRUE(seq_run(cache, b));
  EXPECT_EQ(b.cached, 8);
  seq_release(cache, b);

  FakeSeq c;
  c.tokens = tokens_make({{10, 12}, {100, 3}});
  ASSERT_TRUE(seq_run(cache, c));
  EXPECT_EQ(c.cached, 12);
  seq_release(cache, c);

  FakeSeq d;  // diverges inside block 1
  d.tokens = tokens_make({{10, 6}, {200, 10}});
  ASSERT_TRUE(seq_run(cache, d));
  EXPECT_EQ(d.cached, 4);
  seq_release(cache, d);
  EXPECT_EQ(cache.stats().blocks_referenced, 0);
}

TEST(PrefixCache, NoCheckpointNoHit) {
  // KV blocks alone are never a hit (the seed's bug): the state must come from the same prefix.
  PrefixCache cache(config_make(1 << 20));
  FakeSeq a;
  a.tokens = tokens_make({{10, 16}});
  ASSERT_TRUE(seq_run(cache, a, /*checkpoints=*/false));
  seq_release(cache, a);
  EXPECT_EQ(cache.stats().blocks_indexed, 4);
  FakeSeq b;
  b.tokens = tokens_make({{10, 16}, {50, 2}});
  ASSERT_TRUE(seq_run(cache, b));
  EXPECT_EQ(b.cached, 0);
  seq_release(cache, b);
  // b's run attached its checkpoints to a's indexed blocks: now a third request hits.
  FakeSeq c;
  c.tokens = tokens_make({{10, 16}, {60, 1}});
  ASSERT_TRUE(seq_run(cache, c));
  EXPECT_EQ(c.cached, 16);
  seq_release(cache, c);
}

TEST(PrefixCache, SaltIsolates) {
  PrefixCache cache(config_make(1 << 20));
  FakeSeq a;
  a.tokens = tokens_make({{10, 9}});
  a.salt = "alice";
  ASSERT_TRUE(seq_run(cache, a));
  seq_release(cache, a);
  FakeSeq b = a;
  b.salt = "bob";
  ASSERT_TRUE(seq_run(cache, b));
  EXPECT_EQ(b.cached, 0);
  seq_release(cache, b);
  FakeSeq c = a;
  ASSERT_TRUE(seq_run(cache, c));
  EXPECT_EQ(c.cached, 8);
  seq_release(cache, c);
}

TEST(PrefixCache, TokensVerifiedOnKeyCollision) {
  CacheConfig cfg = config_make(1 << 20);
  cfg.key_bits = 0;  // every block claims the same key
  PrefixCache cache(cfg);
  const std::vector<int32_t> t1 = {1, 2, 3, 4}, t2 = {9, 9, 9, 9};
  const int32_t b1 = cache.block_acquire();
  cache.block_commit(std::span(&b1, 1), 0, t1, "", cache.checkpoint_acquire());
  const int32_t b2 = cache.block_acquire();
  cache.block_commit(std::span(&b2, 1), 0, t2, "", cache.checkpoint_acquire());
  EXPECT_EQ(cache.stats().collisions, 1);
  cache.check_invariants();
  // A lookup whose key matches b1's must not reuse b1: the tokens differ.
  std::vector<int32_t> q = t2;
  q.push_back(0);
  EXPECT_EQ(cache.lookup(q, "", 4).n_tokens, 0);
  cache.block_release(b1);
  cache.block_release(b2);
  EXPECT_EQ(cache.stats().blocks_indexed, 1);
  cache.check_invariants();
}

TEST(PrefixCache, LookupRejectsTokenMismatchUnderEqualKey) {
  // The stored block and the query share a key (key_bits 0: one key for all) but not tokens.
  CacheConfig cfg = config_make(1 << 20);
  cfg.key_bits = 0;
  PrefixCache cache(cfg);
  const std::vector<int32_t> stored = {5, 6, 7, 8}, query = {1, 2, 3, 4, 0};
  const int32_t b = cache.block_acquire();
  cache.block_commit(std::span(&b, 1), 0, stored, "", cache.checkpoint_acquire());
  cache.block_release(b);
  EXPECT_EQ(cache.lookup(query, "", 4).n_tokens, 0);
  const std::vector<int32_t> honest = {5, 6, 7, 8, 0};
  EXPECT_EQ(cache.lookup(honest, "", 4).n_tokens, 4) << "the block's own tokens must still hit";
}

TEST(PrefixCache, EvictionKeepsCheckpointPrefixAndBudget) {
  // Budget for ~10 blocks + a few checkpoints: a stream of requests forces evictions.
  const int64_t budget = 10 * kBlockBytes + 4 * kCheckpointBytes;
  PrefixCache cache(config_make(budget));
  std::mt19937 rng(1);
  int64_t hits = 0;
  for (int r = 0; r < 300; ++r) {
    FakeSeq s;
    const int32_t doc = static_cast<int32_t>(rng() % 4) * 1000;
    s.tokens = tokens_make({{doc, 1 + static_cast<int64_t>(rng() % 20)},
                            {doc + 500, static_cast<int64_t>(rng() % 6)}});
    if (seq_run(cache, s)) hits += s.cached > 0;
    EXPECT_LE(cache.stats().bytes_resident, budget);
    seq_release(cache, s);
  }
  const CacheStats st = cache.stats();
  EXPECT_GT(st.evicted_blocks, 0);
  EXPECT_GT(st.evicted_checkpoints, 0);
  EXPECT_GT(hits, 0);
  EXPECT_EQ(st.blocks_referenced, 0);
  cache.check_invariants();
}

TEST(PrefixCache, EvictsUselessLeavesBeforeCheckpoints) {
  const int64_t budget = 6 * kBlockBytes + 1 * kCheckpointBytes;
  PrefixCache cache(config_make(budget));
  FakeSeq a;
  a.tokens = tokens_make({{10, 8}, {0, 1}});  // 2 full blocks + tail
  ASSERT_TRUE(seq_run(cache, a, false));      // indexed, no checkpoint: useless once released
  seq_release(cache, a);
  FakeSeq b;
  b.tokens = tokens_make({{500, 4}, {0, 1}});
  ASSERT_TRUE(seq_run(cache, b, true));  // 1 block with checkpoint
  seq_release(cache, b);
  // Needs 5 blocks: the 2 useless ones must go, b's checkpointed block must stay.
  FakeSeq c;
  c.tokens = tokens_make({{900, 17}});
  const PrefixHit none = cache.lookup(c.tokens, "", 16);
  cache.hit_apply(none, c.state);
  for (int i = 0; i < 3; ++i) c.blocks.push_back(cache.block_acquire());
  EXPECT_EQ(cache.stats().evicted_blocks, 0);
  c.blocks.push_back(cache.block_acquire());
  EXPECT_EQ(cache.stats().evicted_blocks, 1);
  EXPECT_EQ(cache.stats().evicted_checkpoints, 0);
  FakeSeq b2 = b;
  EXPECT_EQ(cache.lookup(b2.tokens, "", 4).n_tokens, 4);
  seq_release(cache, c);
}

TEST(PrefixCache, AcquireFailsWhenAllReferenced) {
  PrefixCache cache(config_make(3 * kBlockBytes));
  std::vector<int32_t> held;
  for (int i = 0; i < 3; ++i) held.push_back(cache.block_acquire());
  EXPECT_EQ(cache.block_acquire(), -1);
  EXPECT_EQ(cache.checkpoint_acquire(), -1);
  EXPECT_EQ(cache.blocks_obtainable(), 0);
  for (int32_t b : held) cache.block_release(b);
  EXPECT_EQ(cache.blocks_obtainable(), 3);
  EXPECT_EQ(cache.stats().bytes_resident, 0);
}

TEST(PrefixCache, RandomRequestsAndCancellationsLeaveNothingReferenced) {
  const int64_t budget = 40 * kBlockBytes + 10 * kCheckpointBytes;
  PrefixCache cache(config_make(budget));
  std::mt19937 rng(7);
  std::vector<FakeSeq> live;
  for (int r = 0; r < 200; ++r) {
    FakeSeq s;
    const int32_t doc = static_cast<int32_t>(rng() % 3) * 1000;
    s.tokens = tokens_make({{doc, 1 + static_cast<int64_t>(rng() % 24)},
                            {doc + 7 * r, static_cast<int64_t>(rng() % 5)}});
    s.salt = rng() % 5 == 0 ? "other" : "";
    if (!seq_run(cache, s)) {
      seq_release(cache, s);  // refused for memory: give back what it got
    } else {
      live.push_back(std::move(s));
    }
    // Cancel or finish a random live request (cancellation and completion release alike).
    while (live.size() > 3 || (!live.empty() && rng() % 3 == 0)) {
      const size_t k = rng() % live.size();
      seq_release(cache, live[k]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    }
    EXPECT_LE(cache.stats().bytes_resident, budget);
  }
  for (auto& s : live) seq_release(cache, s);
  const CacheStats st = cache.stats();
  EXPECT_EQ(st.blocks_referenced, 0);
  EXPECT_GT(st.hits, 0);
  EXPECT_EQ(st.blocks_resident, st.blocks_indexed) << "a private block leaked";
  cache.check_invariants();
}

int64_t resident_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  return -1;
}

TEST(PrefixCache, BookkeepingIsChargedToTheBudget) {
  // A model without attention layers: blocks have no KV, only tokens and links.
  CacheConfig cfg = config_make(0);
  cfg.block_floats = 0;
  const CacheBudget plan = PrefixCache::budget_plan(cfg);
  EXPECT_EQ(plan.block_kv_bytes, 0);
  EXPECT_GE(plan.block_meta_bytes, kBs * static_cast<int64_t>(sizeof(int32_t)) + 16);
  EXPECT_GT(plan.checkpoint_meta_bytes, 0);
  cfg.cache_bytes = 6 * plan.block_bytes() + plan.block_bytes() / 2;
  PrefixCache cache(cfg);
  std::vector<int32_t> held;
  for (int32_t b; (b = cache.block_acquire()) >= 0;) held.push_back(b);
  EXPECT_EQ(held.size(), 6u) << "blocks without KV must still be charged";
  CacheStats st = cache.stats();
  EXPECT_EQ(st.bytes_kv, 0);
  EXPECT_EQ(st.bytes_metadata, 6 * plan.block_meta_bytes);
  ASSERT_LE(plan.checkpoint_bytes(), 3 * plan.block_bytes());
  EXPECT_EQ(st.bytes_resident, st.bytes_kv + st.bytes_checkpoints + st.bytes_metadata);
  EXPECT_LE(st.bytes_resident, cfg.cache_bytes);
  for (int i = 0; i < 3; ++i) cache.block_release(held[static_cast<size_t>(i)]);
  const int32_t c = cache.checkpoint_acquire();
  ASSERT_GE(c, 0);
  st = cache.stats();
  EXPECT_EQ(st.bytes_checkpoints, plan.checkpoint_state_bytes);
  EXPECT_EQ(st.bytes_metadata, 3 * plan.block_meta_bytes + plan.checkpoint_meta_bytes);
  cache.check_invariants();
  EXPECT_NE(plan.describe().find("metadata"), std::string::npos) << plan.describe();
}

TEST(PrefixCache, MemoryFollowsUseNotCapacity) {
  // The shape that once made a 1 GiB budget cost 5 GB: millions of possible blocks, none used.
  CacheConfig cfg = config_make(int64_t{1} << 30);
  cfg.block_floats = 0;
  cfg.block_size = 64;
  const int64_t before = resident_kib();
  {
    PrefixCache cache(cfg);
    EXPECT_GT(cache.budget().blocks_max, 1'000'000);
    std::vector<int32_t> held;
    for (int i = 0; i < 1000; ++i) held.push_back(cache.block_acquire());
    EXPECT_LT(resident_kib() - before, 4 * 1024) << "tables sized from capacity, not use";
    for (int32_t b : held) cache.block_release(b);
  }
}

TEST(PrefixCache, FreedSlotsReturnTheirPagesWhenTheOtherKindNeedsTheBudget) {
  // Large slots: fill the budget with blocks, free them, then fill it with checkpoints.
  CacheConfig cfg = config_make(0);
  cfg.block_floats = 16 << 10;  // 64 KiB
  cfg.state_floats = 16 << 10;
  const CacheBudget plan = PrefixCache::budget_plan(cfg);
  cfg.cache_bytes = 256 * plan.block_bytes();  // about 16 MiB
  PrefixCache cache(cfg);
  const int64_t before = resident_kib();
  std::vector<int32_t> held;
  for (int32_t b; (b = cache.block_acquire()) >= 0;) {
    std::memset(cache.block_data(b), 1, static_cast<size_t>(plan.block_kv_bytes));
    held.push_back(b);
  }
  for (int32_t b : held) cache.block_release(b);
  held.clear();
  for (int32_t c; (c = cache.checkpoint_acquire()) >= 0;) {
    std::memset(cache.checkpoint_data(c), 1, static_cast<size_t>(plan.checkpoint_state_bytes));
    held.push_back(c);
  }
  EXPECT_GT(held.size(), 200u);
  const int64_t grown = (resident_kib() - before) * 1024;
  cache.check_invariants();
  for (int32_t c : held) cache.checkpoint_release(c);
  if (test::kSanitizerBuild) return;  // the resident bound is the release tree's
  EXPECT_LT(grown, cfg.cache_bytes + (1 << 20)) << "both kinds resident at once";
}

TEST(PrefixCache, TablesShrinkWhenBlocksGiveWayToCheckpoints) {
  // A checkpoint costs about 15 blocks. A phase of prompts without checkpoints fills the budget
  // with blocks, then a phase of one-block prompts with checkpoints evicts most of them: the
  // block tables must fall with the blocks, not keep the first phase's peak beside the
  // checkpoint tables' own.
  CacheConfig cfg = config_make(0);
  cfg.state_floats = 672;  // 2688 bytes
  const CacheBudget plan = PrefixCache::budget_plan(cfg);
  cfg.cache_bytes = 2000 * plan.block_bytes();
  ASSERT_GT(plan.checkpoint_bytes(), 14 * plan.block_bytes());
  PrefixCache cache(cfg);
  // Bound: the ids both kinds' tables hold, each at its full cost, within 1.5 × the budget (+ 9
  // ids each): compaction brings each kind back to ≤ 1.5 × its ids in use + 8, and what is in
  // use fits the budget. Tables that keep both peaks reach ~1.9 × the budget here.
  const int64_t bound =
      cfg.cache_bytes * 3 / 2 + 9 * (plan.block_bytes() + plan.checkpoint_bytes());
  int64_t held_max = 0;
  std::string held_max_when;
  const AfterOp tables_check = [&] {
    const CacheStats st = cache.stats();
    const int64_t held =
        st.block_ids * plan.block_bytes() + st.checkpoint_ids * plan.checkpoint_bytes();
    if (held <= held_max) return;
    held_max = held;
    held_max_when = std::to_string(st.block_ids) + " block ids and " +
                    std::to_string(st.checkpoint_ids) + " checkpoint ids for " +
                    std::to_string(st.blocks_resident) + " blocks and " +
                    std::to_string(st.checkpoints_resident) + " checkpoints in use";
  };
  for (int32_t r = 0; r < 60; ++r) {
    FakeSeq s;
    s.tokens = tokens_make({{r * 1000, 40 * kBs + 1}});
    ASSERT_TRUE(seq_run(cache, s, /*checkpoints=*/false, tables_check));
    seq_release(cache, s, tables_check);
  }
  const CacheStats blocks_phase = cache.stats();
  EXPECT_GT(blocks_phase.block_ids, 1950) << "the first phase must reach the blocks' peak";
  FakeSeq last;
  for (int32_t r = 0; r < 400; ++r) {
    last = FakeSeq{};
    last.tokens = tokens_make({{100'000 + r * 10, kBs + 1}});
    ASSERT_TRUE(seq_run(cache, last, /*checkpoints=*/true, tables_check));
    seq_release(cache, last, tables_check);
  }
  EXPECT_LE(held_max, bound) << "at worst " << held_max_when;
  const CacheStats st = cache.stats();
  EXPECT_GT(st.evicted_blocks, 1800);
  EXPECT_GT(st.checkpoints_resident, 100);
  EXPECT_LE(st.block_ids, st.blocks_resident + st.blocks_resident / 2 + 9)
      << "block tables kept " << st.block_ids << " ids for " << st.blocks_resident << " blocks";
  EXPECT_LT(st.bytes_tables, blocks_phase.bytes_tables / 3);
  EXPECT_GT(st.blocks_moved, 0);
  // The renumbered cache still serves the last prompt, with its own bits.
  FakeSeq again = last;
  ASSERT_TRUE(seq_run(cache, again));
  EXPECT_EQ(again.cached, kBs);
  seq_release(cache, again);
  std::printf("tables held at most %.2f × the budget (%s)\n",
              static_cast<double>(held_max) / static_cast<double>(cfg.cache_bytes),
              held_max_when.c_str());
}

// Checks, for every probe, that what lookup() serves carries the probe's own prefix bits;
// returns the tokens each would be served.
std::vector<int64_t> probes_check(const PrefixCache& cache, const std::vector<FakeSeq>& probes) {
  std::vector<int64_t> served;
  for (const FakeSeq& p : probes) {
    const int64_t n = static_cast<int64_t>(p.tokens.size());
    const PrefixHit hit = cache.lookup(p.tokens, p.salt, n - 1);
    served.push_back(hit.n_tokens);
    for (size_t i = 0; i < hit.blocks.size(); ++i)
      EXPECT_TRUE(pattern_holds(cache.block_data(hit.blocks[i]), kBlockFloats,
                                kv_tag(p.tokens, static_cast<int64_t>(i))))
          << "block " << i << " served another prefix's KV";
    if (hit.n_tokens > 0) {
      EXPECT_TRUE(pattern_holds(cache.checkpoint_data(hit.checkpoint), kStateFloats,
                                state_tag(p.tokens, hit.n_tokens / kBs)))
          << "checkpoint served another prefix's state";
    }
  }
  return served;
}

TEST(PrefixCache, CompactionKeepsEveryBitAndEveryHeldId) {
  // Random requests, cancellations, checkpoint bursts held in flight and explicit compactions.
  // After every operation: the invariants, the bits of every block and checkpoint the test
  // holds (their ids must not move), and the bits of everything lookups serve.
  const int64_t budget = 48 * kBlockBytes + 6 * kCheckpointBytes;
  PrefixCache cache(config_make(budget));
  std::mt19937 rng(29);
  std::vector<FakeSeq> live, probes;
  std::vector<std::pair<int32_t, float>> held;  // checkpoints in flight and their tags
  float held_tag = 0;
  const AfterOp verify = [&] {
    for (const FakeSeq& s : live)
      for (size_t i = 0; i < s.blocks.size(); ++i)
        ASSERT_TRUE(pattern_holds(cache.block_data(s.blocks[i]), kBlockFloats,
                                  kv_tag(s.tokens, static_cast<int64_t>(i))))
            << "a held block lost its bits";
    for (auto [c, tag] : held)
      ASSERT_TRUE(pattern_holds(cache.checkpoint_data(c), kStateFloats, tag))
          << "a checkpoint in flight lost its bits";
    probes_check(cache, probes);
  };
  int64_t blocks_moved_by_ops = 0, checkpoints_moved_by_ops = 0;  // not by tables_compact()
  for (int op = 0; op < 3000; ++op) {
    const CacheStats before = cache.stats();
    const uint32_t kind = rng() % 10;
    if (kind < 4) {  // a request, with checkpoints every 1, 2 or no block
      FakeSeq s;
      const int32_t doc = static_cast<int32_t>(rng() % 6) * 1000;
      s.tokens = tokens_make({{doc, 1 + static_cast<int64_t>(rng() % 28)},
                              {doc + 100 + op, static_cast<int64_t>(rng() % 9)}});
      s.salt = rng() % 7 == 0 ? "other" : "";
      const uint32_t every = rng() % 3;
      const bool ok = seq_run(cache, s, every == 0 || (every == 1 && op % 2 == 0), verify);
      if (probes.size() < 40) {
        probes.push_back(s);
      } else {
        probes[rng() % probes.size()] = s;
      }
      if (!ok) {
        seq_release(cache, s, verify);
      } else {
        live.push_back(std::move(s));
      }
    } else if (kind < 7 || live.size() > 4) {  // a request ends or is cancelled
      if (live.empty()) continue;
      const size_t k = rng() % live.size();
      FakeSeq s = std::move(live[k]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      seq_release(cache, s, verify);
    } else if (kind < 9) {  // checkpoints acquired in flight (a burst), or some given back
      if (held.empty()) {
        for (int64_t n = static_cast<int64_t>(rng() % 40); n > 0; --n) {
          const int32_t c = cache.checkpoint_acquire();
          if (c < 0) break;
          pattern_write(cache.checkpoint_data(c), kStateFloats, held_tag);
          held.emplace_back(c, held_tag);
          held_tag += 100;
          cache.check_invariants();
          verify();
        }
      } else {
        while (!held.empty() && rng() % 8 != 0) {
          const size_t k = rng() % held.size();
          cache.checkpoint_release(held[k].first);
          held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
          cache.check_invariants();
          verify();
        }
      }
    } else {  // an explicit compaction: every probe is served as much, with the same bits
      const std::vector<int64_t> served = probes_check(cache, probes);
      cache.tables_compact();
      cache.check_invariants();
      verify();
      EXPECT_EQ(probes_check(cache, probes), served) << "compaction changed what lookups serve";
      continue;
    }
    const CacheStats after = cache.stats();
    blocks_moved_by_ops += after.blocks_moved - before.blocks_moved;
    checkpoints_moved_by_ops += after.checkpoints_moved - before.checkpoints_moved;
    if (::testing::Test::HasFatalFailure()) return;
  }
  for (auto [c, tag] : held) cache.checkpoint_release(c);
  for (FakeSeq& s : live) seq_release(cache, s, verify);
  cache.check_invariants();
  const CacheStats st = cache.stats();
  std::printf("%ld hits, %ld compactions; moved by operations: %ld blocks, %ld checkpoints\n",
              long(st.hits), long(st.compactions), long(blocks_moved_by_ops),
              long(checkpoints_moved_by_ops));
  EXPECT_GT(blocks_moved_by_ops, 0) << "no operation compacted the block tables by itself";
  EXPECT_GT(checkpoints_moved_by_ops, 0) << "no operation compacted the checkpoint tables";
  EXPECT_GT(st.compactions, 10);
  EXPECT_GT(st.hits, 100);
  EXPECT_EQ(st.blocks_referenced, 0);
}

TEST(SlotArena, HandsOutTheLowestFreeIdAndShrinksAboveTheHighestInUse) {
  SlotArena arena(16, 100);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(arena.acquire(), i);
  arena.release(7);
  arena.release(2);
  arena.release(5);
  EXPECT_EQ(arena.acquire(), 2);
  EXPECT_EQ(arena.shrink(), 0) << "id 9 is in use";
  arena.data(8)[3] = 42.0f;
  EXPECT_EQ(arena.move_down(8), 5);
  EXPECT_EQ(arena.data(5)[3], 42.0f);
  EXPECT_EQ(arena.move_down(1), 1) << "no lower id is free";
  arena.release(9);
  EXPECT_EQ(arena.shrink(), 3);  // 7, 8 and 9
  EXPECT_EQ(arena.made(), 7);
  EXPECT_EQ(arena.in_use(), 7);
  arena.check_invariants();
  EXPECT_EQ(arena.acquire(), 7);
  EXPECT_EQ(arena.data(7)[3], 0.0f) << "an id made again starts from zeroed pages";
}

TEST(LruList, RenameKeepsThePlaceAndShrinkKeepsTheOrder) {
  LruList l(8);
  for (int32_t i : {5, 1, 7, 3}) l.push_back(i);
  l.rename(7, 0);
  l.rename(5, 2);
  l.shrink(4);
  l.check_invariants();
  std::vector<int32_t> order;
  while (!l.empty()) {
    order.push_back(l.front());
    l.remove(l.front());
  }
  EXPECT_EQ(order, (std::vector<int32_t>{2, 1, 0, 3}));
}

}  // namespace prefix_cache_test
}  // namespace invar
