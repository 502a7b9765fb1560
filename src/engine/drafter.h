// Speculative decoding, the proposing side: a Drafter guesses the next tokens of a sequence; the
// engine runs the last verified token and the guesses through the trunk as one chunk and keeps
// exactly the tokens plain decoding would have produced (engine/spec_verify.h). A drafter can
// only change speed, never an answer, so it is free to be wrong, slow to learn, or stateful.
//
// Per step, on the engine thread:
//   1. propose(): for every decoding sequence at once (an MTP head batches its forwards), up to
//      max_k drafts to follow the verified tokens;
//   2. the trunk verifies them;
//   3. hidden_observe(): the trunk's hidden rows of the positions that turned out verified
//      (only for a drafter that wants_hidden());
//   4. accepted(): how many of the proposal plain decoding confirmed.
// Prefill chunks also go through step 3, so a drafter sees the hidden row of every position the
// trunk computes; positions served from the prefix cache are never computed, hence never seen.
// After a preemption the sequence is recomputed and positions are observed again (pos0 goes
// back): a drafter with its own per-position cache (MTP KV) overwrites from pos0 on.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/thread_pool.h"

namespace invar {

class Model;  // model/model.h

struct DrafterConfig {
  int64_t max_k = 4;      // --spec-tokens: drafts per sequence per step, at most
  int64_t ngram_min = 1;  // --spec-ngram-min: shortest suffix the n-gram drafter matches
  int64_t ngram_max = 4;  // --spec-ngram-max: longest suffix it tries first
};

// One sequence's drafting state (MTP: its KV and last hidden row; n-gram: nothing). Made by the
// drafter, owned by the engine's sequence, destroyed when the request ends.
class DraftSeq {
 public:
  virtual ~DraftSeq() = default;
};

// One sequence's request in a propose() call.
struct DraftJob {
  DraftSeq* seq = nullptr;
  // The prompt and every verified generated token; the last one has not run through the trunk
  // yet (its logits come from the verification chunk that starts with it).
  std::span<const int32_t> tokens;
  int64_t max_k = 0;                    // ≥ 1: at most this many drafts are useful
  std::vector<int32_t>* out = nullptr;  // drafts, in order (empty on entry; empty: no guess)
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string_view name() const = 0;
  // True when the drafter reads the trunk's hidden rows: the engine then asks the model for them
  // (SeqChunk::hidden) on every chunk and calls hidden_observe().
  virtual bool wants_hidden() const { return false; }
  // Per-request state, made when the request is admitted to the engine.
  virtual std::unique_ptr<DraftSeq> seq_make(std::span<const int32_t> prompt) = 0;
  // Fills each job's out with up to max_k drafts. `pool` is the engine's compute pool (free
  // during this call).
  virtual void propose(std::span<DraftJob> jobs, ThreadPool& pool) = 0;
  // The trunk computed verified positions [pos0, pos0 + n) of the sequence; hidden is
  // [n][n_embd], row i for position pos0 + i (the trunk's final hidden row after output_norm,
  // the LM head's input: SeqChunk::hidden).
  virtual void hidden_observe(DraftSeq& seq, int64_t pos0, int64_t n, const float* hidden) {
    (void)seq, (void)pos0, (void)n, (void)hidden;
  }
  // Of the last proposal's n_drafted tokens, the first n_accepted became part of the output;
  // `tokens` is the verified sequence now (it may also end the request right after).
  virtual void accepted(DraftSeq& seq, std::span<const int32_t> tokens, int64_t n_drafted,
                        int64_t n_accepted) {
    (void)seq, (void)tokens, (void)n_drafted, (void)n_accepted;
  }
};

}  // namespace invar
