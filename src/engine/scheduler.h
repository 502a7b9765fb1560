// The scheduler: which tokens of which requests run in the next engine step. Pure bookkeeping
// (STYLE 7) over the prefix cache; the engine runs the plan and reports the results.
//
// Each step: decode tokens of running requests first (one each), then admission of waiting
// ones, then prefill chunks — all under max_batch_tokens (continuous batching, chunked
// prefill). A waiting request is admitted only when the cache can supply the blocks of its
// whole prompt; when blocks run out mid-flight the newest running request is preempted (blocks
// released, recomputed later — mostly from the cache it just filled).
// Chunks may end anywhere: every block boundary a chunk crosses gets a checkpoint slot (N5).
// A decode chunk may carry drafts (speculative decoding): the last token and up to the drafts
// that fit, all verified at once; only the positions the engine keeps are committed. Drafts
// cross into the next block only when the step has budget left and the cache has a free block
// (never an eviction); an unused one goes back at commit.
//
// Fairness (fair_share.h): sequences come in units — the n choices of one request — each of one
// client. A step computes at most its share of each unit's sequences (the least recently
// computed first), admission goes to the units furthest below their share (then by priority and
// arrival within a client), and a unit below its share that finds every slot taken gets one
// from the unit furthest above its share (preempted). When every unit holds no more than its
// share and seats still run out (more single-choice requests than seats), a sequence that has
// held its seat for seat_quantum steps yields it (seats_rotate()): a request waits at most a
// quantum for its first token, whatever the others ask for. Prefill tokens are divided max-min fair
// across clients, then units. A unit's later choices that share the first one's prompt wait
// until the first has computed it, then hit its blocks: one prefill for n choices. So do other
// requests whose prompts share whole blocks that a running request is still computing: the
// questions about one document that arrive together compute the document once.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "cache/prefix_cache.h"
#include "cache/slot_arena.h"
#include "engine/fair_share.h"
#include "engine/scheduled_seq.h"

namespace invar {

class TierBridge;  // cache/tier_bridge.h

struct SchedulerConfig {
  int64_t block_size = 64;         // tokens per KV block
  int64_t checkpoint_every = 1;    // checkpoint every N block boundaries
  bool prefix_cache = true;        // lookups, commits and checkpoints on
  int64_t max_batch_tokens = 512;  // tokens per step (≥ 1)
  int64_t max_running = 64;        // sequences holding a live state at once
  int64_t fair_ratio = 1;          // fair_share.h: a request's seats per step ≤ this × the
                                   // smallest competing demand (0: no bound)
  int64_t seat_quantum = 32;       // steps a sequence holds its seat before it yields it to a
                                   // request below its share that finds every seat taken
                                   // (seats_rotate(); 0: never)
  int64_t client_max_running = 0;  // seats one client may hold at once, even alone (0: no cap)
  int64_t state_floats = 0;        // live recurrent state per running sequence
};

struct ChunkPlan {
  ScheduledSeq* seq = nullptr;
  int64_t pos0 = 0, n_tokens = 0;
  // Decode with drafts: tokens are seq->tokens[pos0] then seq->drafts[0 .. n_draft).
  int64_t n_draft = 0;
  // Set by the engine before commit(): positions whose tokens turned out verified, a head of
  // the chunk (n_tokens unless drafts were rejected or the request ended inside the chunk).
  int64_t n_kept = 0;
  std::vector<int64_t> checkpoint_pos;  // block boundaries in (pos0, pos0 + n]
  std::vector<int32_t> checkpoint_ids;  // cache checkpoint per boundary
  std::vector<float*> checkpoint_dst;   // their buffers
};

struct StepPlan {
  std::vector<ChunkPlan> chunks;  // capacity kept between steps
  int64_t n_chunks = 0;
  int64_t n_tokens = 0;
};

struct SchedulerCounters {
  int64_t preemptions = 0;     // every kind: memory, shares and seat rotation
  int64_t seat_rotations = 0;  // of them, seats yielded after a quantum (seats_rotate())
  int64_t cached_tokens = 0;   // sum of tokens served from cache at admission
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& cfg, PrefixCache& cache);

  // Lookups that memory serves only in part are first extended from the lower tiers (null: none).
  void tiers_attach(TierBridge* tiers) { tiers_ = tiers; }
  void enqueue(ScheduledSeq* s) { enqueue_group({&s, 1}); }  // a request of one choice
  // The choices of one request: one unit. With the prefix cache on, choices after the first
  // that have its tokens, salt and cache lookup wait until the first has computed its prompt.
  void enqueue_group(std::span<ScheduledSeq* const> seqs);
  bool has_work() const { return !running_.empty() || n_waiting_ > 0; }
  // Fills plan (previous contents discarded). Sequences that can never fit are appended to
  // `refused` (removed from the queue; the caller reports them).
  void schedule(StepPlan& plan, std::vector<ScheduledSeq*>& refused);
  // After the model ran the plan: advance progress by each chunk's n_kept, commit the full
  // blocks and their checkpoints; checkpoints past n_kept (rejected drafts) go back unused.
  void commit(const StepPlan& plan);
  // Finished or cancelled: releases everything the sequence holds and forgets it.
  void remove(ScheduledSeq* s);

  float* state(const ScheduledSeq& s) const { return states_.data(s.state_slot); }
  const std::vector<ScheduledSeq*>& running() const { return running_; }
  int64_t waiting_count() const { return n_waiting_; }
  int64_t units_waiting() const;  // units with a sequence waiting (the engine's queue limit)
  const SchedulerCounters& counters() const { return counters_; }
  const SchedulerConfig& config() const { return cfg_; }

 private:
  bool blocks_ensure(ScheduledSeq* s, int64_t n_positions);
  void admit(ScheduledSeq* s);
  void preempt(ScheduledSeq* s);
  void chunk_add(StepPlan& plan, ScheduledSeq* s, int64_t n);
  int64_t prefill_add(StepPlan& plan, ScheduledSeq* s, int64_t budget);
  void release_all(ScheduledSeq* s);

  // One request's sequences.
  struct Unit {
    uint64_t client = 0;
    int64_t priority = 0;
    uint64_t arrival = 0;               // enqueue order
    std::deque<ScheduledSeq*> waiting;  // choice order; preempted sequences go to the front
    int64_t running = 0;                // of its sequences
    int64_t members = 0;                // enqueued and not removed
    ScheduledSeq* leader = nullptr;     // the first choice, until it has computed its prompt
    int64_t share = 0, selected = 0;    // this step
    int64_t yielded_step = -1;          // the step seats_rotate() last took a seat of it
    size_t client_group = 0;            // this step: index into client_running_ and _admitted_
  };
  Unit& unit_of(const ScheduledSeq* s) { return units_.at(s->unit); }
  static int64_t admissible(const Unit& u);  // waiting sequences that may be admitted now
  // True when a running sequence is still computing whole blocks of s's prompt that the cache
  // does not hold yet: s waits and hits them once they are committed, instead of computing them
  // a second time beside it (Q questions arriving at once about one document).
  bool waits_for_shared_prefill(const ScheduledSeq& s) const;
  void shares_compute();
  void fair_preempt();
  static constexpr int64_t kYieldedQuanta = 4;
  bool rotation_waits(const Unit& u) const;
  int64_t resume_cost(const ScheduledSeq& s) const;
  bool client_full(const Unit& u) const;
  void seats_rotate();
  void running_select();
  void decode_plan(StepPlan& plan, int64_t& budget);
  void drafts_extend(StepPlan& plan);
  void admission_plan(StepPlan& plan, int64_t budget, std::vector<ScheduledSeq*>& refused);
  void prefill_plan(StepPlan& plan, int64_t& budget);

  SchedulerConfig cfg_;
  PrefixCache& cache_;
  TierBridge* tiers_ = nullptr;
  SlotArena states_;                    // [max_running][state_floats]: live state per running seq
  std::vector<ScheduledSeq*> running_;  // admission order
  std::unordered_map<uint64_t, Unit> units_;
  uint64_t next_unit_ = 1;
  int64_t n_waiting_ = 0;
  int64_t step_ = 0;
  SchedulerCounters counters_;
  // Scratch, capacity kept between steps (no allocation per step once grown).
  std::vector<FairUnit> fair_;
  std::vector<Unit*> fair_units_;          // parallel to fair_, grouped by client
  std::vector<int64_t> client_running_;    // per client group: its running sequences
  std::vector<uint64_t> client_admitted_;  // per client group: client_last_ of it
  // Client → the admission count at its last admission (round-robin across clients), kept
  // while the client has a unit and for a while after.
  std::unordered_map<uint64_t, uint64_t> client_last_;
  uint64_t admissions_ = 0;
  struct Pick {  // a running sequence in some order
    int64_t key0 = 0;
    uint64_t key1 = 0;
    size_t index = 0;  // in running_
    bool operator<(const Pick& o) const {
      return std::tie(key0, key1, index) < std::tie(o.key0, o.key1, o.index);
    }
  };
  std::vector<Pick> picks_;
  std::vector<size_t> starts_;
  std::vector<int64_t> demand_, alloc_, unit_demand_, unit_alloc_;
};

}  // namespace invar
