// Scheduler + cache bookkeeping without a model (STYLE 7). A fake forward pass checks, for every
// chunk, that the recurrent state it receives and the KV of every earlier position are exactly
// what a cold, unchunked run of the same tokens would have produced — so a wrong restore, a
// checkpoint from the wrong boundary or a reused block of another prefix fails here.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "cache/prefix_cache.h"

namespace invar {
namespace {

constexpr int64_t kStateFloats = 2;  // a 64-bit prefix hash as two 32-bit halves

uint64_t prefix_step(uint64_t h, int32_t token) {
  return PrefixCache::block_key(h ^ 0x51ed27ull, std::span<const int32_t>(&token, 1));
}
void hash_store(float* dst, uint64_t h) {
  std::memcpy(dst, &h, sizeof h);
}
uint64_t hash_load(const float* src) {
  uint64_t h;
  std::memcpy(&h, src, sizeof h);
  return h;
}

// The engine's side of a request, as far as these tests need it.
struct TestSeq : ScheduledSeq {
  int64_t max_tokens = 0;
  int64_t n_generated = 0;
};

struct Harness {
  int64_t bs;
  std::unique_ptr<PrefixCache> cache;
  std::unique_ptr<Scheduler> sched;
  std::vector<std::unique_ptr<TestSeq>> seqs;
  StepPlan plan;
  std::vector<ScheduledSeq*> refused;
  int64_t checkpoints_written = 0;

  Harness(int64_t block_size, int64_t budget_blocks, int64_t budget_ckpts, int64_t max_batch,
          bool prefix = true, int64_t max_running = 8)
      : bs(block_size) {
    CacheConfig cc;
    cc.block_size = bs;
    cc.block_floats = 2 * bs;  // one prefix hash per position
    cc.state_floats = kStateFloats;
    const CacheBudget cost = PrefixCache::budget_plan(cc);
    cc.cache_bytes = budget_blocks * cost.block_bytes() + budget_ckpts * cost.checkpoint_bytes();
    cache = std::make_unique<PrefixCache>(cc);
    SchedulerConfig sc;
    sc.block_size = bs;
    sc.prefix_cache = prefix;
    sc.max_batch_tokens = max_batch;
    sc.max_running = max_running;
    sc.state_floats = kStateFloats;
    sched = std::make_unique<Scheduler>(sc, *cache);
  }

  TestSeq* add(std::vector<int32_t> prompt, int64_t max_tokens, std::string salt = "") {
    auto s = std::make_unique<TestSeq>();
    s->max_tokens = max_tokens;
    s->tokens = std::move(prompt);
    s->n_prompt = static_cast<int64_t>(s->tokens.size());
    s->cache_salt = salt;
    sched->enqueue(s.get());
    seqs.push_back(std::move(s));
    return seqs.back().get();
  }

  // The fake forward: checks inputs against the cold truth, writes outputs.
  void run_chunk(const ChunkPlan& c) {
    ScheduledSeq* s = c.seq;
    uint64_t h = 0;
    for (int64_t p = 0; p < c.pos0; ++p) {
      h = prefix_step(h, s->tokens[static_cast<size_t>(p)]);
      const float* kv = s->block_ptrs[static_cast<size_t>(p / bs)] + 2 * (p % bs);
      ASSERT_EQ(hash_load(kv), h) << "KV of position " << p << " is not this prefix's";
    }
    float* state = sched->state(*s);
    ASSERT_EQ(hash_load(state), h) << "state entering position " << c.pos0 << " is wrong";
    size_t ci = 0;
    for (int64_t p = c.pos0; p < c.pos0 + c.n_tokens; ++p) {
      h = prefix_step(h, s->tokens[static_cast<size_t>(p)]);
      ASSERT_LT(p / bs, static_cast<int64_t>(s->blocks.size()));
      hash_store(s->block_ptrs[static_cast<size_t>(p / bs)] + 2 * (p % bs), h);
      if (ci < c.checkpoint_pos.size() && c.checkpoint_pos[ci] == p + 1) {
        hash_store(c.checkpoint_dst[ci++], h);
        ++checkpoints_written;
      }
    }
    ASSERT_EQ(ci, c.checkpoint_pos.size());
    hash_store(state, h);
  }

  // One engine step; returns the sequences that finished. rng picks generated tokens.
  std::vector<TestSeq*> step(std::mt19937& rng, int64_t max_batch) {
    refused.clear();
    sched->schedule(plan, refused);
    EXPECT_TRUE(refused.empty());
    EXPECT_LE(plan.n_tokens, max_batch);
    for (int64_t k = 0; k < plan.n_chunks; ++k) run_chunk(plan.chunks[static_cast<size_t>(k)]);
    sched->commit(plan);
    std::vector<TestSeq*> done;
    for (int64_t k = 0; k < plan.n_chunks; ++k) {
      auto* s = static_cast<TestSeq*>(plan.chunks[static_cast<size_t>(k)].seq);
      if (s->remaining() > 0) continue;
      s->tokens.push_back(static_cast<int32_t>(rng() % 50));
      if (++s->n_generated >= s->max_tokens) {
        sched->remove(s);
        done.push_back(s);
      }
    }
    cache->check_invariants();
    return done;
  }
};

std::vector<int32_t> doc_tokens(int64_t n, int32_t seed) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 7 + seed * 13) % 97));
  return t;
}

TEST(Scheduler, CheckpointAtEveryBoundaryWhateverTheBudget) {
  for (int64_t budget : {1, 3, 7, 64}) {
    Harness h(4, 64, 64, budget);
    std::mt19937 rng(1);
    h.add(doc_tokens(30, 1), 1);
    while (h.sched->has_work()) h.step(rng, budget);
    // 30 tokens cross boundaries 4, 8, ..., 28: seven checkpoints, however the chunks fell.
    EXPECT_EQ(h.checkpoints_written, 7) << "budget " << budget;
    EXPECT_EQ(h.cache->stats().blocks_referenced, 0);
  }
}

TEST(Scheduler, SiblingWarmsThePrefixAndHitIsExact) {
  // The seed's shape: A (shorter, another tail) then B, under several chunk budgets.
  for (int64_t budget : {1, 5, 64}) {
    Harness h(16, 64, 64, budget);
    std::mt19937 rng(2);
    std::vector<int32_t> doc = doc_tokens(40, 3);
    std::vector<int32_t> a = doc, b = doc;
    for (int i = 0; i < 3; ++i) a.push_back(90 + i);
    for (int i = 0; i < 9; ++i) b.push_back(80 + i);
    h.add(a, 2);
    while (h.sched->has_work()) h.step(rng, budget);
    TestSeq* sb = h.add(b, 2);
    while (h.sched->has_work()) h.step(rng, budget);
    EXPECT_EQ(sb->cached_tokens, 32) << "budget " << budget;
  }
}

TEST(Scheduler, NoPrefixCacheNoHitNoCheckpoint) {
  Harness h(4, 64, 64, 64, /*prefix=*/false);
  std::mt19937 rng(3);
  h.add(doc_tokens(20, 1), 1);
  while (h.sched->has_work()) h.step(rng, 64);
  TestSeq* b = h.add(doc_tokens(20, 1), 1);
  while (h.sched->has_work()) h.step(rng, 64);
  EXPECT_EQ(b->cached_tokens, 0);
  EXPECT_EQ(h.checkpoints_written, 0);
  EXPECT_EQ(h.cache->stats().blocks_resident, 0);
}

TEST(Scheduler, RandomLoadWithPreemptionAndCancellationLeaksNothing) {
  // A budget far below the offered load: admission waits, decode preempts, the cache evicts.
  const int64_t max_batch = 16;
  Harness h(4, 24, 6, max_batch, true, 6);
  std::mt19937 rng(11);
  int64_t submitted = 0, finished = 0, cancelled = 0, hits = 0;
  int64_t max_bytes = 0;
  std::vector<TestSeq*> live;
  for (int iter = 0; iter < 5000 && (submitted < 200 || h.sched->has_work()); ++iter) {
    while (submitted < 200 && rng() % 2 == 0) {
      const int32_t doc = static_cast<int32_t>(rng() % 3);
      std::vector<int32_t> p = doc_tokens(4 + rng() % 20, doc);
      for (uint32_t i = 0, n = rng() % 5; i < n; ++i) p.push_back(static_cast<int32_t>(rng() % 97));
      live.push_back(h.add(p, 1 + rng() % 12, rng() % 7 == 0 ? "salted" : ""));
      ++submitted;
    }
    if (!live.empty() && rng() % 9 == 0) {  // cancel a random live request
      const size_t k = rng() % live.size();
      h.sched->remove(live[k]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      ++cancelled;
    }
    for (TestSeq* s : h.step(rng, max_batch)) {
      ++finished;
      hits += s->cached_tokens > 0;
      live.erase(std::find(live.begin(), live.end(), s));
    }
    max_bytes = std::max(max_bytes, h.cache->stats().bytes_resident);
    if (testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(submitted, 200);
  EXPECT_EQ(finished + cancelled, 200);
  EXPECT_FALSE(h.sched->has_work());
  const CacheStats st = h.cache->stats();
  EXPECT_EQ(st.blocks_referenced, 0);
  EXPECT_EQ(st.blocks_resident, st.blocks_indexed) << "a private block leaked";
  EXPECT_LE(max_bytes, h.cache->config().cache_bytes);
  EXPECT_GT(h.sched->counters().preemptions, 0) << "the load never forced a preemption";
  EXPECT_GT(st.evicted_blocks, 0);
  EXPECT_GT(hits, 0);
}

TEST(Scheduler, RefusesWhatCanNeverFit) {
  Harness h(4, 2, 0, 64);
  std::mt19937 rng(5);
  h.add(doc_tokens(20, 1), 1);  // needs 6 blocks, the budget holds 2
  h.sched->schedule(h.plan, h.refused);
  EXPECT_EQ(h.refused.size(), 1u);
  EXPECT_FALSE(h.sched->has_work());
}

}  // namespace
}  // namespace invar
