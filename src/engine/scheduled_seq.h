// The scheduler's part of a request: its tokens, how far the model has computed them, and the
// KV blocks and live state it holds. The engine's Sequence adds what it reports; the scheduler
// and its tests see only this.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace invar {

enum class SeqPhase { waiting, running, finished };

struct ScheduledSeq {
  std::vector<int32_t> tokens;  // prompt, then every generated token
  // What the prefix cache keys it by when that differs from tokens (a prompt with images:
  // SeqImages::cache_key_tokens), as long as tokens; empty: tokens.
  std::vector<int32_t> key_tokens;
  const std::vector<int32_t>& cache_tokens() const {
    return key_tokens.empty() ? tokens : key_tokens;
  }
  int64_t n_prompt = 0;
  std::string cache_salt;    // isolates its prefix-cache chain
  bool cache_lookup = true;  // false: every position is computed (prompt logprobs want them all)
  SeqPhase phase = SeqPhase::waiting;
  // Fairness (engine/fair_share.h), set before it is enqueued.
  uint64_t client = 0;   // a digest of the client's key (API key, peer address or user)
  int64_t priority = 0;  // vLLM's priority: lower is admitted first among its client's requests

  // Set by the scheduler.
  uint64_t unit = 0;         // the request it belongs to: the n choices of one request share it
  int64_t last_step = -1;    // the step it last computed in (rotation within its unit's share)
  int64_t seated_step = -1;  // the step it was last admitted in (seat rotation: oldest yields)
  bool selected = false;     // may compute in the step being planned (cleared by its decode chunk)

  // Compute progress (reset by preemption: recompute from the cache or from scratch).
  int64_t n_done = 0;              // positions whose KV and state are computed
  std::vector<int32_t> blocks;     // block table: block i holds positions [i·bs, (i+1)·bs)
  std::vector<float*> block_ptrs;  // [blocks] data pointers, as SeqChunk::kv_blocks wants them
  int32_t state_slot = -1;         // live recurrent state slot while running

  int64_t cached_tokens = -1;  // tokens served from cache at first admission (survives preemption)
  // Speculative decoding: guesses for the tokens after the last one, proposed for the next
  // decode step (the scheduler may run fewer; none of them is ever part of `tokens`).
  std::vector<int32_t> drafts;

  int64_t remaining() const { return static_cast<int64_t>(tokens.size()) - n_done; }
};

}  // namespace invar
