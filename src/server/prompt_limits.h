// Cheap structural limits checked on a request body before its prompt is rendered or
// tokenised (and before its messages are even validated): work that cannot end in a prompt the
// context holds is refused for what it costs to count, not for what it costs to render
// (100,000 empty messages took 1.5 s before their context-length 400). A token covers at most
// `max_token_bytes` bytes of text (the vocabulary's longest), so text longer than n_ctx × that
// cannot fit, and a message adds at least one token.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

namespace invar::server {

struct PromptLimits {
  int64_t n_ctx = 0;           // the context limit
  size_t max_token_bytes = 0;  // the vocabulary's longest token
  size_t text_bytes() const { return size_t(n_ctx) * max_token_bytes; }
};

// Throws ApiError (400) naming the field: more messages than the context has tokens; message
// text (every string in `messages` but an image part's URL), tool definitions (every string in
// `tools`) or a prompt string longer than PromptLimits::text_bytes(); more prompt token ids than
// n_ctx. A prompt with truncate_prompt_tokens may be longer than the context: its text is not
// bounded here. `body` is a completions or chat body, or a /tokenize one.
void prompt_limits_check(const nlohmann::json& body, const PromptLimits& lim);
void prompt_limits_check(const nlohmann::ordered_json& body, const PromptLimits& lim);

}  // namespace invar::server
