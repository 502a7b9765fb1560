// One request inside the engine: the scheduler's part (tokens, compute progress, KV blocks, live
// state) and what the engine has reported of it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/constraint.h"
#include "engine/drafter.h"
#include "engine/request.h"
#include "engine/scheduled_seq.h"

namespace invar {

struct Sequence : ScheduledSeq {
  RequestId id = 0;
  GenerationRequest req;
  EventSink sink;

  // Reporting (survives preemption, so nothing is reported twice).
  int64_t n_generated = 0;
  int64_t logits_reported = 0;     // capture_logits: rows for positions < this were sent
  int64_t prompt_lp_reported = 1;  // prompt_logprobs: positions < this were sent
  std::vector<std::pair<int64_t, std::vector<float>>> logits_pending;
  // Speculative decoding: the drafter's state for this request, and drafts run / kept.
  std::unique_ptr<DraftSeq> draft_state;
  int64_t n_drafted = 0, n_accepted = 0;
  // The drafter has seen the hidden rows of positions < this (computed or restored from the
  // blocks of a cache hit; survives preemption: recomputed rows have the same bits).
  int64_t hidden_observed = 0;
  // Structured output: the grammar's state over the generated tokens (null: unconstrained).
  std::unique_ptr<SeqConstraint> constraint;

  bool wants_all_logits() const { return req.capture_logits || req.prompt_logprobs.has_value(); }
};

// The scheduler hands back the ScheduledSeq part of the engine's sequences.
inline Sequence& sequence_of(ScheduledSeq* s) {
  return *static_cast<Sequence*>(s);
}

}  // namespace invar
