// One request inside the engine: its tokens (prompt, then generated), how far the model has
// computed them, the KV blocks and live recurrent state it holds, and what it has reported.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace invar {

enum class SeqPhase { waiting, running, finished };

struct Sequence {
  RequestId id = 0;
  GenerationRequest req;
  EventSink sink;
  uint64_t salt_key = 0;  // PrefixCache::salt_key(req.cache_salt)

  std::vector<int32_t> tokens;  // prompt, then every generated token
  int64_t n_prompt = 0;
  SeqPhase phase = SeqPhase::waiting;
  int64_t admit_order = 0;  // larger = admitted later (preemption victims first)

  // Compute progress (reset by preemption: recompute from the cache or from scratch).
  int64_t n_done = 0;              // positions whose KV and state are computed
  std::vector<int32_t> blocks;     // block table: block i holds positions [i·bs, (i+1)·bs)
  std::vector<float*> block_ptrs;  // [blocks] data pointers, as SeqChunk::kv_blocks wants them
  std::vector<uint64_t> keys;      // chain keys of the full blocks committed so far
  int32_t state_slot = -1;         // live recurrent state slot while running

  // Reporting (survives preemption, so nothing is reported twice).
  int64_t cached_tokens = -1;  // tokens served from cache at first admission
  int64_t n_generated = 0;
  int64_t logits_reported = 0;     // capture_logits: rows for positions < this were sent
  int64_t prompt_lp_reported = 1;  // prompt_logprobs: positions < this were sent
  std::vector<std::pair<int64_t, std::vector<float>>> logits_pending;

  int64_t remaining() const { return static_cast<int64_t>(tokens.size()) - n_done; }
  bool wants_all_logits() const { return req.capture_logits || req.prompt_logprobs >= 0; }
};

}  // namespace invar
