// Speculative decoding's engine side: before a step, the drafter's guesses for every sequence
// about to decode (bounded so that no draft can be wasted on positions plain decoding would
// never compute); after it, what the verification kept, for the drafter and the counters.
// Verification itself is postprocessing (engine/postprocess.h), state rollback is the model
// runner's: speculation changes which positions a step computes, never a token or a bit.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cache/block_hidden.h"
#include "engine/drafter.h"
#include "engine/postprocess.h"
#include "engine/sequence.h"

namespace invar {

class SpecDecoder {
 public:
  // drafter may be null: speculation off. `hidden`: where the sequences' KV blocks keep the
  // trunk's hidden rows for a drafter that reads them (off: they keep none).
  SpecDecoder(std::unique_ptr<Drafter> drafter, const DrafterConfig& cfg, int64_t n_vocab,
              int64_t n_ctx, const BlockHidden& hidden = {});

  bool on() const { return drafter_ != nullptr; }
  const Drafter* drafter() const { return drafter_.get(); }
  void seq_begin(Sequence& s);
  // Fills `drafts` of every running sequence that decodes next (one token left to compute).
  void propose(const std::vector<ScheduledSeq*>& running, ThreadPool& pool);
  // After postprocessing chunk c of sequence s, before the scheduler commits it: hidden rows of
  // its kept positions (null when the model gave none) and, for a chunk with drafts, what was
  // accepted. The rows go into the sequence's blocks (so a later hit serves them); the rows of
  // positions the drafter never saw below the chunk (a prefix-cache hit) come from the blocks
  // first, so it observes every position as if the trunk had computed it.
  void chunk_done(Sequence& s, const ChunkPlan& c, const ChunkOutcome& o, const float* hidden);
  void metrics_fill(EngineMetrics& m) const;

 private:
  void hidden_restore(Sequence& s, int64_t end);
  void hidden_store(Sequence& s, int64_t pos0, int64_t n, const float* hidden) const;

  std::unique_ptr<Drafter> drafter_;
  const DrafterConfig cfg_;
  const BlockHidden hidden_;
  std::vector<float> zeros_;  // [block_size][n_embd]: the rows of a block that has none
  const int64_t n_vocab_, n_ctx_;
  std::vector<DraftJob> jobs_;
  uint64_t drafted_ = 0, accepted_ = 0, verifications_ = 0;
  std::vector<uint64_t> hist_;  // [max_k + 1]
};

}  // namespace invar
