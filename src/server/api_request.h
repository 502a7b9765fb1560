// OpenAI request bodies (/v1/completions, /v1/chat/completions) parsed and validated into one
// flat struct. Pure: no model, no tokenizer. Every rejection is a 400 naming the field. Every
// top-level field is checked against the registry of request_fields.h first: unknown fields and
// fields invar cannot honour exactly (guided decoding, ...) are rejected rather than silently
// dropped. The chat fields are parsed by chat_request_parse.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/request.h"
#include "server/chat_prompt.h"
#include "server/output_constraint.h"
#include "server/prompt_limits.h"

namespace invar::server {

enum class Endpoint { completions, chat };

// One prompt of a /v1/completions request: text or token ids (exactly one set).
struct CompletionPrompt {
  std::optional<std::string> text;
  std::vector<int32_t> ids;
};
// Prompts one /v1/completions request may list.
inline constexpr int64_t kMaxPrompts = 256;

struct ApiRequest {
  Endpoint endpoint = Endpoint::completions;
  std::string model;  // "" when absent

  // Exactly one prompt form is set: prompt_text (completions string), prompt_ids (completions
  // token-id array) or chat (messages, tools, ... for the chat template).
  std::optional<std::string> prompt_text;
  std::vector<int32_t> prompt_ids;
  ChatInput chat;
  // /v1/completions with a list of prompts: the second and later (the first is above). Each is
  // its own engine request (n of them with `n`); choices are numbered prompt-major, as OpenAI's.
  std::vector<CompletionPrompt> more_prompts;

  std::optional<int64_t> max_tokens;  // max_tokens / max_completion_tokens; unset: default
  // The engine's sampling parameters as sent (request_check ranges them), OpenAI's temperature
  // of 1 when absent. Penalties and logit_bias: vLLM's formulas, in vLLM's order
  // (engine/penalties.h); repetition_penalty is vLLM's repetition_penalty or llama-server's
  // repeat_penalty, never both, its window repeat_last_n, else 64 for repeat_penalty
  // (llama-server's default), all tokens for repetition_penalty.
  SamplingParams sampling = [] {
    SamplingParams p;
    p.temperature = 1.0f;
    return p;
  }();
  bool has_seed = false;
  std::vector<std::string> stop;  // stop strings (≤ 16, non-empty)
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // stream_options.continuous_usage_stats (vLLM): with include_usage, every chunk carries the
  // usage so far.
  bool continuous_usage = false;

  bool logprobs = false;                   // chat: logprobs=true; completions: logprobs is an int
  int64_t top_logprobs = 0;                // candidates per token (request_check: 0..20)
  bool echo = false;                       // completions: prepend the prompt (+ its logprobs)
  std::optional<int64_t> prompt_logprobs;  // vLLM extension: set, returns prompt logprobs
  bool tokens_as_ids = false;  // vLLM return_tokens_as_token_ids: tokens as "token_id:N"
  bool ignore_eos = false;     // vLLM extension: end-of-sequence tokens do not stop
  std::string cache_salt;      // vLLM extension: isolates the prefix cache

  // The rest of the request surface (docs/api.md; request_fields.h lists every field).
  int64_t n = 1;                        // choices, each its own seeded stream
  bool skip_special_tokens = true;      // vLLM's default: control tokens add no text
  std::vector<int32_t> stop_token_ids;  // vLLM: more ids that end the completion
  int64_t truncate_prompt_tokens = 0;   // vLLM: keep only the last N prompt tokens (0: all)
  std::string request_id;               // vLLM: the response id's suffix ("" → random)
  std::string user;                     // OpenAI: end-user id, written to the request log
  int64_t priority = 0;                 // vLLM: lower first among one client's requests
  std::string served_name;              // set by the server: the name responses carry

  // Structured output (output_constraint.h): the one constraint the request names, if any.
  std::optional<OutputConstraint> constraint;
  // Chat fields OpenAI defines for its own platform (docs/api.md).
  std::string service_tier;  // as sent ("" absent); responses name the tier used: "default"
  // Set by the server: who asks, for the engine's fairness (API key, else peer address, else
  // user; http_server.cpp).
  std::string client_key;
  // The tenant whose key the request presented ("": no auth); cache_salt is already in its
  // namespace, and the grammar and image caches key by it too.
  std::string tenant;
  // Set by the server: the chat's images (ChatInput::images) as read, PNG or JPEG bytes; the
  // prompt's maker encodes them (off the IO threads) once the template has rendered their
  // pads. Null: none.
  std::shared_ptr<const std::vector<std::string>> image_files;
};

// Throws ApiError (400) naming the first bad field. With `limits`, the body's prompt shape is
// checked against them (prompt_limits.h) before its messages are parsed. The JSON's shape is
// checked here, the values' ranges by the engine's request_fields_fault.
ApiRequest api_request_parse(std::string_view body, Endpoint endpoint,
                             const PromptLimits* limits = nullptr);

// The engine request's fields that `r` sets by itself, without its prompt: sampling, stop
// strings, logprob counts (top_logprobs as sent, whether or not logprobs is on), max_tokens
// when sent (else INT32_MAX), cache salt, client and priority.
GenerationRequest engine_request_of(const ApiRequest& r);

}  // namespace invar::server
