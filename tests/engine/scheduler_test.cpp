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
#include "engine/fair_share.h"

namespace invar {
namespace scheduler_test {

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
          bool prefix = true, int64_t max_running = 8, int64_t seat_quantum = 32,
          int64_t client_max_running = 0)
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
    sc.seat_quantum = seat_quantum;
    sc.client_max_running = client_max_running;
    sc.state_floats = kStateFloats;
    sched = std::make_unique<Scheduler>(sc, *cache);
  }

  TestSeq* add(std::vector<int32_t> prompt, int64_t max_tokens, std::string salt = "") {
    return add_group(std::move(prompt), max_tokens, 1, 0, 0, salt).front();
  }
  // One request of n choices from `client`.
  std::vector<TestSeq*> add_group(std::vector<int32_t> prompt, int64_t max_tokens, int64_t n,
                                  uint64_t client, int64_t priority = 0, std::string salt = "") {
    std::vector<TestSeq*> out;
    std::vector<ScheduledSeq*> group;
    for (int64_t i = 0; i < n; ++i) {
      auto s = std::make_unique<TestSeq>();
      s->max_tokens = max_tokens;
      s->tokens = prompt;
      s->n_prompt = static_cast<int64_t>(s->tokens.size());
      s->cache_salt = salt;
      s->client = client;
      s->priority = priority;
      out.push_back(s.get());
      group.push_back(s.get());
      seqs.push_back(std::move(s));
    }
    sched->enqueue_group(group);
    return out;
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

  // Tokens computed in the last step, per sequence.
  std::vector<std::pair<TestSeq*, int64_t>> last_plan() const {
    std::vector<std::pair<TestSeq*, int64_t>> out;
    for (int64_t k = 0; k < plan.n_chunks; ++k) {
      const ChunkPlan& c = plan.chunks[static_cast<size_t>(k)];
      out.emplace_back(static_cast<TestSeq*>(c.seq), c.n_tokens);
    }
    return out;
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

TEST(Scheduler, OneTokenPromptRunsInTheStepItIsAdmitted) {
  // Its only position is both its prompt and its first decode input.
  Harness h(4, 64, 64, 64);
  std::mt19937 rng(4);
  TestSeq* s = h.add({7}, 2);
  h.step(rng, 64);
  ASSERT_EQ(h.last_plan().size(), 1u);
  EXPECT_EQ(h.last_plan()[0].first, s);
  while (h.sched->has_work()) h.step(rng, 64);
  EXPECT_EQ(s->n_generated, 2);
}

TEST(Scheduler, RefusesWhatCanNeverFit) {
  Harness h(4, 2, 0, 64);
  std::mt19937 rng(5);
  h.add(doc_tokens(20, 1), 1);  // needs 6 blocks, the budget holds 2
  h.sched->schedule(h.plan, h.refused);
  EXPECT_EQ(h.refused.size(), 1u);
  EXPECT_FALSE(h.sched->has_work());
}

// Drafts run on into the next block only from room the cache has free: the block goes back at
// commit when no kept position reached it, and a cache with no free room (which would have to
// evict) cuts them at the block's end as before.
TEST(Scheduler, DraftsCrossABlockOnlyFromFreeRoom) {
  for (bool room : {true, false}) {
    Harness h(4, room ? 16 : 2, 1, 64);
    std::mt19937 rng(5);
    TestSeq* s = h.add(doc_tokens(7, 2), 10);
    h.step(rng, 64);  // the prompt: positions 0..6, blocks 0 and 1
    ASSERT_EQ(s->remaining(), 1);
    s->drafts = {1, 2, 3, 4, 5};
    h.sched->schedule(h.plan, h.refused);
    ASSERT_EQ(h.plan.n_chunks, 1);
    ChunkPlan& c = h.plan.chunks[0];
    const int64_t evicted = h.cache->stats().evicted_blocks;
    EXPECT_EQ(c.n_tokens, room ? 4 : 1) << "position 7, then drafts up to before position 11";
    EXPECT_EQ(c.n_draft, c.n_tokens - 1);
    EXPECT_EQ(static_cast<int64_t>(s->blocks.size()), room ? 3 : 2);
    c.n_kept = 1;  // every draft rejected
    h.sched->commit(h.plan);
    EXPECT_EQ(s->n_done, 8);
    EXPECT_EQ(static_cast<int64_t>(s->blocks.size()), 2) << "the unused block went back";
    EXPECT_EQ(h.cache->stats().blocks_referenced, 2);
    EXPECT_EQ(h.cache->stats().evicted_blocks, evicted);
    h.cache->check_invariants();
  }
}

TEST(FairShare, WaterFillingBoundedByTheRatio) {
  // Alone, a request takes every seat; beside equals, an equal part.
  std::vector<FairUnit> alone = {{1, 128, 0}};
  fair_shares(alone, 64, 2);
  EXPECT_EQ(alone[0].share, 64);
  std::vector<FairUnit> two = {{1, 128, 0}, {2, 128, 0}};
  fair_shares(two, 64, 2);
  EXPECT_EQ(two[0].share, 32);
  EXPECT_EQ(two[1].share, 32);
  // Beside a small one, at most ratio × its part (water-filling alone would give 63 + 1).
  std::vector<FairUnit> hostile = {{1, 128, 0}, {2, 1, 0}};
  fair_shares(hostile, 64, 2);
  EXPECT_EQ(hostile[0].share, 2);
  EXPECT_EQ(hostile[1].share, 1);
  fair_shares(hostile, 64, 0);
  EXPECT_EQ(hostile[0].share, 63) << "ratio 0: plain water-filling";
  // Client 1's three units take 2 + 1 + 2 among themselves, so client 1 counts as 5 and
  // client 2 gets at most 10; client 3 has no demand and no share.
  std::vector<FairUnit> u = {{1, 100, 0}, {1, 1, 0}, {1, 5, 0}, {2, 128, 0}, {3, 0, 0}};
  fair_shares(u, 64, 2);
  EXPECT_EQ(u[0].share, 2);
  EXPECT_EQ(u[1].share, 1);
  EXPECT_EQ(u[2].share, 2);
  EXPECT_EQ(u[3].share, 10);
  EXPECT_EQ(u[4].share, 0);
  // More clients than seats: one each (the running set is still capped by the slots).
  std::vector<FairUnit> many(10);
  for (size_t i = 0; i < many.size(); ++i) many[i] = {i, 3, 0};
  fair_shares(many, 4, 2);
  for (const FairUnit& x : many) EXPECT_EQ(x.share, 1);
  EXPECT_EQ(fair_level(std::vector<int64_t>{5, 9, 30}, 20, 0), 7);  // 5 + 7 + 7
  EXPECT_EQ(fair_level(std::vector<int64_t>{5, 9, 30}, 100, 0), 30);
  EXPECT_EQ(fair_level(std::vector<int64_t>{5, 9, 30}, 100, 3), 15);
}

TEST(FairShare, MaxMinSplitOfTokens) {
  std::vector<int64_t> demand = {1000, 3, 40, 1000}, out(4);
  fair_split(demand, 448, out);
  EXPECT_EQ(out[1], 3);
  EXPECT_EQ(out[2], 40);
  EXPECT_EQ(out[0] + out[3], 448 - 43);
  EXPECT_LE(std::abs(out[0] - out[3]), 1);
  fair_split(demand, 5000, out);
  EXPECT_EQ(out, demand) << "enough for all: everyone gets what it asked";
  fair_split(demand, 2, out);
  EXPECT_EQ(out[0] + out[1] + out[2] + out[3], 2);
}

// The attacker's request (many choices, long completions) from one client, then a small request
// from another: the small one is admitted in the next step (a slot taken from the large one),
// every step computes at most fair_ratio (1) of the large one's sequences, and the small one
// finishes in as many steps as it has tokens. The fake forward checks every chunk's state and
// KV against the cold truth, so the preemptions and rotations cost no bit.
TEST(Scheduler, SmallRequestBesideAHostileOneWaitsBoundedSteps) {
  const int64_t max_running = 16, budget = 64;
  Harness h(4, 4096, 4096, budget, true, max_running);
  std::mt19937 rng(7);
  std::vector<TestSeq*> big = h.add_group(doc_tokens(3, 1), 200, 64, /*client=*/1);
  for (int i = 0; i < 5; ++i) h.step(rng, budget);
  int64_t big_running = 0;
  for (auto [s, n] : h.last_plan()) big_running += s->client == 1;
  EXPECT_EQ(big_running, max_running) << "alone, the large request takes every slot";

  TestSeq* small = h.add_group(doc_tokens(5, 2), 8, 1, /*client=*/2).front();
  int64_t steps = 0;
  while (small->n_generated < small->max_tokens) {
    h.step(rng, budget);
    ++steps;
    ASSERT_FALSE(testing::Test::HasFatalFailure());
    int64_t big_in_step = 0;
    bool small_in_step = false;
    for (auto [s, n] : h.last_plan()) {
      big_in_step += s->client == 1;
      small_in_step = small_in_step || s == small;
    }
    EXPECT_TRUE(small_in_step) << "step " << steps << ": the small request did not compute";
    EXPECT_LE(big_in_step, 1) << "step " << steps << ": over fair_ratio × the small one's 1";
    ASSERT_LE(steps, 20);
  }
  // Its prompt in one step, then one token per step: 1 + 7.
  EXPECT_EQ(steps, 8);
  EXPECT_GT(h.sched->counters().preemptions, 0) << "no slot was taken from the large request";
  while (h.sched->has_work()) {
    h.step(rng, budget);
    ASSERT_FALSE(testing::Test::HasFatalFailure());
  }
  for (TestSeq* s : big) EXPECT_EQ(s->n_generated, 200);
  EXPECT_EQ(h.cache->stats().blocks_referenced, 0);
}

// Seats full of single-choice requests, each at its share (one seat): shares free no seat, so
// a newcomer gets one by rotation from the oldest seat once it has been held a quantum; the one
// that yielded resumes from the cache (the fake forward checks its state and KV against a cold
// run) and ends, and the newcomer's 4 steps cost one rotation, not a cascade. Without rotation
// the newcomer waits for a whole completion. All from one client: the case of many requests
// from one address, where no share of a client's seats helps.
TEST(Scheduler, NewcomerBesideSeatsFullOfLongRequestsWaitsAtMostAQuantum) {
  for (int64_t quantum : {8, 0}) {
    SCOPED_TRACE("seat_quantum " + std::to_string(quantum));
    const int64_t max_running = 4, budget = 64;
    Harness h(4, 4096, 4096, budget, true, max_running, quantum);
    std::mt19937 rng(11);
    std::vector<TestSeq*> longs;
    for (int32_t i = 0; i < 4; ++i) longs.push_back(h.add_group(doc_tokens(6, i), 100, 1, 1)[0]);
    for (int i = 0; i < 20; ++i) h.step(rng, budget);  // every seat held past the quantum
    ASSERT_EQ(h.sched->counters().preemptions, 0);
    TestSeq* newcomer = h.add_group(doc_tokens(5, 9), 4, 1, 1).front();
    int64_t steps = 0;
    while (newcomer->n_generated == 0) {
      h.step(rng, budget);
      ++steps;
      ASSERT_FALSE(testing::Test::HasFatalFailure());
      ASSERT_LE(steps, 200);
    }
    if (quantum > 0) {
      EXPECT_EQ(steps, 1) << "the newcomer waited for a seat";
      EXPECT_EQ(h.sched->counters().seat_rotations, 1);
    } else {
      EXPECT_GE(steps, 100 - 20) << "without rotation it waits for a whole completion";
      EXPECT_EQ(h.sched->counters().seat_rotations, 0);
    }
    while (h.sched->has_work()) {
      h.step(rng, budget);
      ASSERT_FALSE(testing::Test::HasFatalFailure());
    }
    for (TestSeq* s : longs) EXPECT_EQ(s->n_generated, 100);
    EXPECT_EQ(h.sched->counters().seat_rotations, quantum > 0 ? 1 : 0)
        << "the request that yielded took a seat back by rotation before waiting a quantum";
    EXPECT_EQ(h.cache->stats().blocks_referenced, 0);
  }
}

// The seat that yields is the oldest of the client holding the most seats.
TEST(Scheduler, SeatRotationTakesFromTheClientHoldingMostSeats) {
  Harness h(4, 4096, 4096, 64, true, /*max_running=*/4, /*seat_quantum=*/8);
  std::mt19937 rng(12);
  TestSeq* lone = h.add_group(doc_tokens(6, 1), 100, 1, /*client=*/2).front();
  h.step(rng, 64);  // client 2's seat is the oldest
  std::vector<TestSeq*> many;
  for (int32_t i = 0; i < 3; ++i) many.push_back(h.add_group(doc_tokens(6, 2 + i), 100, 1, 1)[0]);
  for (int i = 0; i < 12; ++i) h.step(rng, 64);
  h.add_group(doc_tokens(5, 9), 4, 1, /*client=*/3);
  h.step(rng, 64);
  EXPECT_EQ(h.sched->counters().seat_rotations, 1);
  EXPECT_EQ(lone->phase, SeqPhase::running) << "the client with one seat lost it";
  int64_t waiting = 0;
  for (TestSeq* s : many) waiting += s->phase == SeqPhase::waiting;
  EXPECT_EQ(waiting, 1);
}

// Among seats held a quantum, the one that yields is the one that resumes cheapest: just past a
// block boundary, it recomputes a single position.
TEST(Scheduler, SeatRotationTakesTheSeatThatResumesCheapest) {
  Harness h(4, 4096, 4096, 64, true, /*max_running=*/4, /*seat_quantum=*/8);
  std::mt19937 rng(14);
  std::vector<TestSeq*> longs;  // prompts of 5..8 tokens: their lengths differ mod the block
  for (int32_t i = 0; i < 4; ++i) longs.push_back(h.add_group(doc_tokens(5 + i, i), 100, 1, 1)[0]);
  for (int i = 0; i < 10; ++i) h.step(rng, 64);
  h.add_group(doc_tokens(5, 9), 4, 1, 1);
  h.step(rng, 64);
  ASSERT_EQ(h.sched->counters().seat_rotations, 1);
  int64_t waiting = 0;
  for (TestSeq* s : longs) {
    if (s->phase != SeqPhase::waiting) continue;
    ++waiting;
    EXPECT_EQ(s->tokens.size() % 4, 1u) << "it recomputes " << (s->tokens.size() - 1) % 4 + 1
                                        << " positions where another would recompute 1";
  }
  EXPECT_EQ(waiting, 1);
}

// A client at its seat cap gets no more seats, even alone with free ones; another client's
// request takes a free seat at once. Without the cap the flood takes every seat.
TEST(Scheduler, ClientSeatCapLeavesSeatsToOthers) {
  for (int64_t cap : {3, 0}) {
    SCOPED_TRACE("client_max_running " + std::to_string(cap));
    Harness h(4, 4096, 4096, 64, true, /*max_running=*/4, /*seat_quantum=*/0, cap);
    std::mt19937 rng(13);
    std::vector<TestSeq*> flood;
    for (int32_t i = 0; i < 6; ++i) flood.push_back(h.add_group(doc_tokens(6, i), 20, 1, 1)[0]);
    auto flood_running = [&] {
      return std::count_if(h.sched->running().begin(), h.sched->running().end(),
                           [](const ScheduledSeq* s) { return s->client == 1; });
    };
    for (int i = 0; i < 3; ++i) {
      h.step(rng, 64);
      EXPECT_EQ(flood_running(), cap > 0 ? cap : 4);
    }
    TestSeq* other = h.add_group(doc_tokens(5, 9), 2, 1, /*client=*/2).front();
    h.step(rng, 64);
    EXPECT_EQ(other->phase == SeqPhase::running, cap > 0) << "the other client found no seat";
    while (h.sched->has_work()) {
      h.step(rng, 64);
      ASSERT_FALSE(testing::Test::HasFatalFailure());
      if (cap > 0) {
        ASSERT_LE(flood_running(), cap);
      }
    }
    for (TestSeq* s : flood) EXPECT_EQ(s->n_generated, 20);
    EXPECT_EQ(other->n_generated, 2);
  }
}

// A request's choices share one prefill: the later ones wait until the first has committed
// the prompt, then hit every full block of it.
TEST(Scheduler, ChoicesOfOneRequestPrefillThePromptOnce) {
  Harness h(16, 256, 256, 512);
  std::mt19937 rng(9);
  std::vector<TestSeq*> choices = h.add_group(doc_tokens(70, 4), 3, 4, 1);
  int64_t computed = 0;
  while (h.sched->has_work()) {
    h.step(rng, 512);
    ASSERT_FALSE(testing::Test::HasFatalFailure());
    for (auto [s, n] : h.last_plan()) computed += n;
  }
  EXPECT_EQ(choices[0]->cached_tokens, 0);
  for (size_t i = 1; i < choices.size(); ++i)
    EXPECT_EQ(choices[i]->cached_tokens, 64) << "choice " << i;
  // 70 prompt tokens once, 6 per later choice, and 2 decode tokens per choice (3 generated).
  EXPECT_EQ(computed, 70 + 3 * 6 + 4 * 2);
  // Without the prefix cache every choice computes the prompt (nothing to share).
  Harness off(16, 256, 256, 512, /*prefix=*/false);
  off.add_group(doc_tokens(70, 4), 3, 4, 1);
  off.step(rng, 512);
  EXPECT_EQ(off.last_plan().size(), 4u) << "choices waited for a prefill they cannot share";
}

// Separate requests (other clients too) whose prompts share a document, arriving together: the
// later ones wait while the first computes the shared blocks, then hit them; a request sharing
// nothing is admitted at once, and without the prefix cache nothing waits.
TEST(Scheduler, RequestsSharingADocumentWaitForItsPrefillThenHitIt) {
  auto prompt = [](int32_t question) {
    std::vector<int32_t> t = doc_tokens(70, 4);  // 4 whole blocks of 16, then 6 tokens
    for (int32_t i = 0; i < 5; ++i) t.push_back(60 + question * 5 + i);
    return t;
  };
  Harness h(16, 256, 256, 24);  // 24 tokens per step: the document takes several steps
  std::mt19937 rng(5);
  std::vector<TestSeq*> qs;
  for (int32_t q = 0; q < 4; ++q) qs.push_back(h.add_group(prompt(q), 2, 1, uint64_t(q)).front());
  TestSeq* other = h.add(doc_tokens(40, 9), 2);
  h.step(rng, 24);
  std::vector<TestSeq*> first_step;
  for (auto [s, n] : h.last_plan()) first_step.push_back(s);
  EXPECT_NE(std::find(first_step.begin(), first_step.end(), other), first_step.end())
      << "a request sharing nothing waited";
  EXPECT_EQ(std::count(first_step.begin(), first_step.end(), qs[1]), 0)
      << "a second question computed the shared document beside the first";
  while (h.sched->has_work()) {
    h.step(rng, 24);
    ASSERT_FALSE(testing::Test::HasFatalFailure());
  }
  EXPECT_EQ(qs[0]->cached_tokens, 0);
  for (size_t i = 1; i < qs.size(); ++i)
    EXPECT_EQ(qs[i]->cached_tokens, 64) << "question " << i << " did not hit the document";
  // Without the prefix cache there is nothing to wait for: every question runs in the first step.
  Harness off(16, 256, 256, 512, /*prefix=*/false);
  for (int32_t q = 0; q < 4; ++q) off.add_group(prompt(q), 2, 1, uint64_t(q));
  off.step(rng, 512);
  EXPECT_EQ(off.last_plan().size(), 4u);
}

// Among one client's requests the lower priority value is admitted first; across clients
// admission alternates.
TEST(Scheduler, PriorityWithinAClientRoundRobinAcross) {
  Harness h(4, 256, 256, 64, true, /*max_running=*/1);
  std::mt19937 rng(3);
  TestSeq* late = h.add_group(doc_tokens(5, 1), 2, 1, /*client=*/1, /*priority=*/5).front();
  TestSeq* urgent = h.add_group(doc_tokens(5, 2), 2, 1, /*client=*/1, /*priority=*/-1).front();
  h.step(rng, 64);
  ASSERT_EQ(h.last_plan().size(), 1u);
  EXPECT_EQ(h.last_plan()[0].first, urgent);
  while (h.sched->has_work()) h.step(rng, 64);
  EXPECT_EQ(late->n_generated, 2);

  // Client 3 sends three requests, then client 4 one: client 4 goes second, not fourth.
  std::vector<TestSeq*> order;
  std::vector<TestSeq*> a;
  for (int i = 0; i < 3; ++i) a.push_back(h.add_group(doc_tokens(5, 3 + i), 1, 1, 3).front());
  TestSeq* b = h.add_group(doc_tokens(5, 9), 1, 1, 4).front();
  while (h.sched->has_work()) {
    h.step(rng, 64);
    for (auto [s, n] : h.last_plan())
      if (std::find(order.begin(), order.end(), s) == order.end()) order.push_back(s);
  }
  EXPECT_EQ(order, (std::vector<TestSeq*>{a[0], b, a[1], a[2]}));
}

// A long prompt does not take the whole budget from a short one that arrives after it.
TEST(Scheduler, PrefillBudgetIsSharedAcrossClients) {
  Harness h(4, 1024, 1024, 64);
  std::mt19937 rng(5);
  TestSeq* longp = h.add_group(doc_tokens(1000, 1), 1, 1, 1).front();
  h.step(rng, 64);
  TestSeq* shortp = h.add_group(doc_tokens(10, 2), 1, 1, 2).front();
  h.step(rng, 64);
  int64_t long_n = 0, short_n = 0;
  for (auto [s, n] : h.last_plan()) {
    if (s == longp) long_n += n;
    if (s == shortp) short_n += n;
  }
  EXPECT_EQ(short_n, 10) << "the short prompt waited behind the long one";
  EXPECT_EQ(long_n, 54);
  while (h.sched->has_work()) {
    h.step(rng, 64);
    ASSERT_FALSE(testing::Test::HasFatalFailure());
  }
}

}  // namespace scheduler_test
}  // namespace invar
