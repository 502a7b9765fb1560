// After the model ran a step: what each chunk produced for its request — captured logits,
// prompt logprobs, the sampled token with its logprobs and text — and whether the request ends
// now. The one owner of stop detection: stop tokens (end of sequence) and stop strings are
// decided here, and the text a caller receives is already cut at a stop string.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "core/thread_pool.h"
#include "engine/penalties.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/text_assembler.h"
#include "tokenizer/end_of_sequence.h"

namespace invar {

class Tokenizer;  // tokenizer/tokenizer.h

// What a chunk produced, beyond its events.
struct ChunkOutcome {
  FinishReason finish = FinishReason::none;  // why the request ends now (none: it continues)
  int64_t n_kept = 0;      // positions of the chunk whose tokens are verified (ChunkPlan::n_kept)
  int64_t n_accepted = 0;  // drafts that became part of the output
};

class Postprocessor {
 public:
  // tokenizer may be null: then tokens carry no text and no stop strings are possible.
  Postprocessor(const Tokenizer* tokenizer, int64_t n_vocab, int64_t n_ctx);

  // Appends the chunk's events to `out` (the caller delivers them once the step is committed),
  // reading logits rows laid out as ModelRunner::logits gives them; `text` is the request's
  // assembler (null without a tokenizer). A chunk with drafts emits a token per row while the
  // draft of that row equals the token plain decoding picks there (the same sampler, position
  // and logits bits), so its output is plain decoding's, cut exactly where plain decoding ends.
  ChunkOutcome process(const ChunkPlan& c, const float* rows, TextAssembler* text,
                       std::vector<RequestEvent>& out);

  // Before the step's process() calls: samples, on the pool's threads, each chunk whose token
  // and logprobs depend on its row alone (no drafts, no grammar), rows_of(k) being chunk k's
  // rows; process() then takes the results instead of computing them on the engine's thread.
  // Sampling is a pure function of (row, parameters, position, the sequence's tokens), so the
  // bits do not depend on the thread that computed them, nor on the thread count.
  void samples_prefetch(const StepPlan& plan, const std::function<const float*(int64_t)>& rows_of,
                        ThreadPool& pool);

  uint64_t generated_total() const { return generated_total_; }

 private:
  // The bytes a generated token adds to the completion's text.
  std::string_view token_text_bytes(const GenerationRequest& r, int32_t id) const;
  void logits_capture(Sequence& s, int64_t pos0, int64_t n, const float* rows);
  void prompt_logprobs_emit(Sequence& s, const ChunkPlan& c, const float* rows,
                            std::vector<RequestEvent>& out);
  // Samples the token after the sequence's last one from `row`, emits it, and says whether the
  // request ends with it.
  FinishReason token_emit(Sequence& s, const float* row, TextAssembler* text,
                          std::vector<RequestEvent>& out);
  ChunkOutcome drafts_verify(Sequence& s, const ChunkPlan& c, const float* rows,
                             TextAssembler* text, std::vector<RequestEvent>& out);

  // min_tokens: while fewer were generated, the stop tokens are masked before selection.
  static bool eog_masked(const Sequence& s) {
    return s.n_generated < s.req.sampling.min_tokens && !s.req.stop_tokens.empty();
  }
  // `row` with the stop tokens at −inf, in mask_scratch_ (copied there unless it is there
  // already); the row unchanged when they are all it allows.
  const float* eog_mask(const float* row, const std::vector<int32_t>& stops);

  // A token sampled ahead by samples_prefetch, for the sequence's row at `position`.
  struct SampledAhead {
    const Sequence* seq = nullptr;
    const float* row = nullptr;  // null once taken
    int64_t position = 0;
    int32_t token = -1;  // -1: not sampled (a non-finite row: token_emit reports it)
    float logprob = 0;
    std::vector<TokenLogprob> top;
  };
  SampledAhead* ahead_find(const Sequence& s, const float* row, int64_t position);

  const Tokenizer* tokenizer_;
  const int64_t n_vocab_, n_ctx_;
  SamplerScratch scratch_;
  PenaltyScratch penalty_scratch_;
  std::vector<float> mask_scratch_;  // [V] a constrained row
  std::vector<float> eog_kept_;      // [stop tokens] their values before eog_mask
  std::vector<SampledAhead> ahead_;
  size_t ahead_next_ = 0;                       // where ahead_find looks first (chunk order)
  std::vector<SamplerScratch> pool_scratch_;    // one per pool thread
  std::vector<PenaltyScratch> pool_penalties_;  // one per pool thread
  uint64_t generated_total_ = 0;
};

}  // namespace invar
