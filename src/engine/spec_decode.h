// Speculative decoding's engine side: before a step, the drafter's guesses for every sequence
// about to decode (bounded so that no draft can be wasted on positions plain decoding would
// never compute); after it, what the verification kept, for the drafter and the counters.
// Verification itself is postprocessing (engine/postprocess.h), state rollback is the model
// runner's: speculation changes which positions a step computes, never a token or a bit.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/drafter.h"
#include "engine/postprocess.h"
#include "engine/sequence.h"

namespace invar {

class SpecDecoder {
 public:
  // drafter may be null: speculation off.
  SpecDecoder(std::unique_ptr<Drafter> drafter, const DrafterConfig& cfg, int64_t n_vocab,
              int64_t n_ctx);

  bool on() const { return drafter_ != nullptr; }
  const Drafter* drafter() const { return drafter_.get(); }
  void seq_begin(Sequence& s);
  // Fills `drafts` of every running sequence that decodes next (one token left to compute).
  void propose(const std::vector<ScheduledSeq*>& running, ThreadPool& pool);
  // After postprocessing chunk c of sequence s: hidden rows of its kept positions (null when
  // the model gave none) and, for a chunk with drafts, what was accepted.
  void chunk_done(Sequence& s, const ChunkPlan& c, const ChunkOutcome& o, const float* hidden);
  void metrics_fill(EngineMetrics& m) const;

 private:
  std::unique_ptr<Drafter> drafter_;
  const DrafterConfig cfg_;
  const int64_t n_vocab_, n_ctx_;
  std::vector<DraftJob> jobs_;
  uint64_t drafted_ = 0, accepted_ = 0, verifications_ = 0;
  std::vector<uint64_t> hist_;  // [max_k + 1]
};

}  // namespace invar
