// After the model ran a step: what each chunk produced for its request — captured logits,
// prompt logprobs, the sampled token with its logprobs and text — and whether the request ends
// now. The one owner of stop detection: stop tokens (end of sequence) and stop strings are
// decided here, and the text a caller receives is already cut at a stop string.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/penalties.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/text_assembler.h"

namespace invar {

class Tokenizer;  // tokenizer/tokenizer.h

// The ids that end a completion in this vocabulary (its end-of-sequence token, <|im_end|>,
// <|endoftext|>): GenerationRequest::stop_tokens unless the caller ignores end of sequence.
std::vector<int32_t> end_of_sequence_ids(const Tokenizer& tok);

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

  const Tokenizer* tokenizer_;
  const int64_t n_vocab_, n_ctx_;
  SamplerScratch scratch_;
  PenaltyScratch penalty_scratch_;
  std::vector<float> mask_scratch_;  // [V] a constrained row
  uint64_t generated_total_ = 0;
};

}  // namespace invar
