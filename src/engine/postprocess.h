// After the model ran a step: what each chunk produced for its request — captured logits,
// prompt logprobs, the sampled token with its logprobs and text — and whether the request ends
// now. The one owner of stop detection: stop tokens (end of sequence) and stop strings are
// decided here, and the text a caller receives is already cut at a stop string.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/text_assembler.h"

namespace invar {

class Tokenizer;  // tokenizer/tokenizer.h

// The ids that end a completion in this vocabulary (its end-of-sequence token, <|im_end|>,
// <|endoftext|>): GenerationRequest::stop_tokens unless the caller ignores end of sequence.
std::vector<int32_t> end_of_sequence_ids(const Tokenizer& tok);

class Postprocessor {
 public:
  // tokenizer may be null: then tokens carry no text and no stop strings are possible.
  Postprocessor(const Tokenizer* tokenizer, int64_t n_vocab, int64_t n_ctx);

  // Emits the chunk's events to its sequence's sink, reading logits rows laid out as
  // ModelRunner::logits gives them; `text` is the request's assembler (null without a
  // tokenizer). Returns why the request ends now, FinishReason::none while it continues.
  FinishReason process(const ChunkPlan& c, const float* rows, TextAssembler* text);

  uint64_t generated_total() const { return generated_total_; }

 private:
  // The bytes a generated token adds to the completion's text.
  std::string_view token_text_bytes(const GenerationRequest& r, int32_t id) const;
  void logits_capture(Sequence& s, const ChunkPlan& c, const float* rows);
  void prompt_logprobs_emit(Sequence& s, const ChunkPlan& c, const float* rows);

  const Tokenizer* tokenizer_;
  const int64_t n_vocab_, n_ctx_;
  SamplerScratch scratch_;
  uint64_t generated_total_ = 0;
};

}  // namespace invar
