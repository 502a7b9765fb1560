// What a front end asks of the engine and what it hears back: the one request type every front
// end (chat, completions, ...) builds, its sampling parameters, the events a request produces
// and the usage it reports. Below the Engine class (engine.h), which takes these.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "engine/seq_images.h"

namespace invar {

namespace grammar {
class Grammar;  // grammar/grammar.h
}

// What went wrong with a request, for the caller to map onto its own protocol (the server: HTTP
// statuses). Everything but `internal` is the caller's doing or a passing condition.
enum class ErrorKind {
  invalid_request,   // a field out of range or inconsistent: fix the request
  context_overflow,  // prompt + max_tokens beyond the context limit or the KV cache budget
  overloaded,        // the waiting queue is full: retry later
  shutting_down,     // the engine is draining or stopped
  internal,          // a bug in invar (a failed forward pass)
  nonfinite,         // the model computed a NaN or Inf logit for this request (damaged weights)
};

class EngineError : public Error {
 public:
  EngineError(ErrorKind kind, std::string param, const std::string& message)
      : Error(message), kind_(kind), param_(std::move(param)) {}
  ErrorKind kind() const { return kind_; }
  const std::string& param() const { return param_; }  // the request field at fault, or ""

 private:
  ErrorKind kind_;
  std::string param_;
};

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy (argmax, ties to the smaller id)
  float top_p = 1.0f;
  int64_t top_k = 0;   // 0: off
  float min_p = 0.0f;  // drop candidates with probability < min_p × the best's (0: off)
  // vLLM's min_tokens: the first min_tokens generated tokens are none of stop_tokens (masked
  // before selection, like a grammar: logprobs stay the model's), and no stop string ends the
  // text before the min_tokens-th token. ≤ max_tokens.
  int64_t min_tokens = 0;
  uint64_t seed = 0;  // counter-based RNG keyed by (seed, position)
  // Applied to the logits before selection, greedy included, in vLLM's order (engine/penalties.h):
  // a pure function of the request's tokens. Logprobs stay those of the model's own logits.
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, added to its logit)
  float repetition_penalty = 1.0f;  // > 0: a seen token's l > 0 ? l / r : l × r (1: off)
  int64_t repetition_last_n = -1;   // the tokens it sees: the last N of prompt + output (-1: all)
  float frequency_penalty = 0.0f;   // l −= f × (the token's count in the output)
  float presence_penalty = 0.0f;    // l −= p when the token is in the output
};

struct GenerationRequest {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int64_t max_tokens = 16;
  std::vector<int32_t> stop_tokens;       // finish "stop" when generated (not part of the text)
  std::vector<std::string> stop_strings;  // finish "stop" when the text contains one (the
                                          // text ends just before it)
  std::string cache_salt;                 // isolates the prefix cache (first block's key)
  // Images in the prompt (null: text only): their pad slots take the tower's rows, every slot
  // its IMROPE position. The prefix cache keys image slots by their pixels' hash: blocks before
  // the first image are shared with any request, blocks from it on only with requests holding
  // the same images at the same slots.
  std::shared_ptr<const SeqImages> images;
  int64_t top_logprobs = 0;  // 0..20 candidates per generated token
  // Set (0..20): logprob of each prompt token ≥ 1 (+ K candidates); forces those positions to
  // be computed (no cache skip). nullopt: none.
  std::optional<int64_t> prompt_logprobs;
  bool capture_logits = false;       // tests: raw logits of every computed position
  bool skip_special_tokens = false;  // control tokens (<|im_end|>) add no text (vLLM's default)
  // Fairness (engine/fair_share.h): the engine's slots are shared equally across clients, then
  // across a client's requests. Neither changes a logit (scheduling decides when, never how).
  std::string client_key;  // who asks ("" is one client like any other)
  int64_t priority = 0;    // vLLM's priority: among one client's requests, lower goes first
  // Structured output (engine/constraint.h): every generated token is one the grammar allows,
  // an end-of-sequence id only once the output is complete, and the request ends when one is
  // generated. Like logit_bias it shapes selection, not the logits: logprobs stay the model's.
  // Needs a tokenizer. null: unconstrained.
  std::shared_ptr<const grammar::Grammar> grammar;
  int32_t grammar_after = -1;  // the grammar starts after this token (</think>); -1: at once
};

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;
};

// What a request used, as the engine counts it: every response's usage object and every log
// line carry this one struct.
struct Usage {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens taken from the prefix cache
  int64_t completion_tokens = 0;
  bool speculative = false;           // the engine runs a drafter (--spec other than none)
  int64_t draft_tokens = 0;           // speculative decoding: drafts verified by the trunk
  int64_t accepted_draft_tokens = 0;  // of them, those that became part of the completion
};

enum class EventKind { token, prompt_logprobs, finished };
enum class FinishReason { none, stop, length, cancelled, error };

struct RequestEvent {
  EventKind kind = EventKind::token;
  // token: the generated token, its logprob and the top candidates (value desc, id asc).
  int32_t token = 0;
  float logprob = 0;
  std::vector<TokenLogprob> top;
  // token: one of stop_tokens; it ends the request and is not part of the completion.
  bool stop_token = false;
  // With a tokenizer, the completion's text as it becomes final: token: the bytes this token
  // releases (whole UTF-8 characters only, held back while they may begin a stop string, cut
  // just before a completed one); finished: whatever was still held back.
  std::string text;
  int64_t position = 0;  // absolute position of the token (prompt_logprobs: of the prompt token)
  // capture_logits: logits rows for computed positions, as (position, [V] floats).
  std::vector<std::pair<int64_t, std::vector<float>>> logits;
  // finished:
  FinishReason finish = FinishReason::none;
  std::string error;  // finish == error: what happened, and what kind of failure it was
  ErrorKind error_kind = ErrorKind::internal;
  Usage usage;
};

// Called on the engine thread, in order, for one request; must not block for long.
using EventSink = std::function<void(RequestEvent&&)>;
using RequestId = uint64_t;

}  // namespace invar
