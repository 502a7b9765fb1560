// The scheduler: which tokens of which requests run in the next engine step. Pure bookkeeping
// (STYLE 7) over the prefix cache; the engine runs the plan and reports the results.
//
// Each step: decode tokens of running requests first (one each), then prefill chunks of
// running requests, then admission of waiting ones — all under max_batch_tokens (continuous
// batching, chunked prefill). A waiting request is admitted only when the cache can supply the
// blocks of its whole prompt; when blocks run out mid-flight the newest running request is
// preempted (blocks released, recomputed later — mostly from the cache it just filled).
// Chunks may end anywhere: every block boundary a chunk crosses gets a checkpoint slot (N5).
// A decode chunk may carry drafts (speculative decoding): the last token and up to the drafts
// that fit, all verified at once; only the positions the engine keeps are committed.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "cache/prefix_cache.h"
#include "cache/slot_arena.h"
#include "engine/scheduled_seq.h"

namespace invar {

struct SchedulerConfig {
  int64_t block_size = 64;         // tokens per KV block
  int64_t checkpoint_every = 1;    // checkpoint every N block boundaries
  bool prefix_cache = true;        // lookups, commits and checkpoints on
  int64_t max_batch_tokens = 512;  // tokens per step (≥ 1)
  int64_t max_running = 64;        // sequences holding a live state at once
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
  int64_t preemptions = 0;
  int64_t cached_tokens = 0;  // sum of tokens served from cache at admission
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& cfg, PrefixCache& cache);

  void enqueue(ScheduledSeq* s);  // back of the waiting queue
  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
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
  const std::deque<ScheduledSeq*>& waiting() const { return waiting_; }
  const SchedulerCounters& counters() const { return counters_; }
  const SchedulerConfig& config() const { return cfg_; }

 private:
  bool blocks_ensure(ScheduledSeq* s, int64_t n_positions);
  void admit(ScheduledSeq* s);
  void preempt(ScheduledSeq* s);
  void chunk_add(StepPlan& plan, ScheduledSeq* s, int64_t n);
  int64_t prefill_add(StepPlan& plan, ScheduledSeq* s, int64_t budget);
  void release_all(ScheduledSeq* s);

  SchedulerConfig cfg_;
  PrefixCache& cache_;
  SlotArena states_;                    // [max_running][state_floats]: live state per running seq
  std::vector<ScheduledSeq*> running_;  // admission order
  std::deque<ScheduledSeq*> waiting_;   // FIFO; preempted sequences return to the front
  SchedulerCounters counters_;
};

}  // namespace invar
