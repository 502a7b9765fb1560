// What a request may ask of this engine: the context limit (resolved here, once) and the one
// check every request passes, whichever front end built it. A refusal is a RequestFault, a
// value the front end words in its own dialect (OpenAI's, Anthropic's, ...); submit() throws it
// as an EngineError in the engine's own words.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/request.h"
#include "model/hparams.h"

namespace invar {

// The context limit: --n-ctx when given, else the model's training context (1 Mi tokens when
// the file states none).
int64_t context_limit(const Hparams& hp, int64_t n_ctx_flag);

struct RequestLimits {
  int64_t n_vocab = 0;
  int64_t n_ctx = 0;
  int64_t block_size = 0;
  int64_t block_capacity = 0;  // KV blocks the cache budget holds
  int64_t cache_bytes = 0;     // the budget, for messages
  bool has_tokenizer = false;  // stop strings need one
  int64_t n_embd = 0;          // image rows' width
  bool imrope = false;         // the model takes images (IMROPE positions)
};

constexpr int64_t kTopLogprobsMax = 20;  // top_logprobs and prompt_logprobs: 0..20

enum class FaultRule {
  range,        // a number outside [lo, hi] ((lo, hi] when lo_open): got
  not_a_token,  // a token id outside [0, hi): got, at index (-1: the field itself)
  empty,        // the prompt, or the stop string at index, is empty
  context,      // prompt (lo) + max_tokens (got − lo) beyond the context limit (hi)
  exceeds,      // the field (got) above another field's value (hi): min_tokens > max_tokens
  other,        // what `message` says (images, a tokenizer needed, the cache budget)
};

// Why a request is refused: the field at fault (GenerationRequest's or SamplingParams' name),
// the rule it breaks with its numbers, and the engine's own wording.
struct RequestFault {
  ErrorKind kind = ErrorKind::invalid_request;  // or context_overflow
  std::string param;
  FaultRule rule = FaultRule::other;
  double lo = 0, hi = 0, got = 0;
  bool lo_open = false;
  bool integral = false;  // an integer field (lo, hi and got are whole)
  int64_t index = -1;
  std::string message;
};

// The checks that need no model: every sampling parameter, logprob counts, stop strings and
// min_tokens against max_tokens. A front end runs this as soon as it has parsed a request.
std::optional<RequestFault> request_fields_fault(const GenerationRequest& r);
// prompt + max_tokens against the context limit (also before a prompt's images are encoded).
std::optional<RequestFault> request_context_fault(int64_t prompt, int64_t max_tokens,
                                                  int64_t n_ctx);
// Everything: the prompt, its images, token ids against the vocabulary, the context, the KV
// cache budget, then request_fields_fault.
std::optional<RequestFault> request_fault(const GenerationRequest& r, const RequestLimits& lim);
// Throws EngineError (invalid_request or context_overflow) with request_fault's first fault.
void request_check(const GenerationRequest& r, const RequestLimits& lim);

}  // namespace invar
