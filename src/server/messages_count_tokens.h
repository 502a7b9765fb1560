// POST /v1/messages/count_tokens (Anthropic's): {"input_tokens": N}, the tokens the same
// request to /v1/messages would feed the model. The body is translated as /v1/messages
// translates it (messages_front_end.h) and counted by /tokenize (tokenize_api.h), which renders
// exactly what a chat renders: one rendering, so the count is the message's usage.input_tokens
// plus its cache reads.
#pragma once

#include <string>
#include <string_view>

#include "server/tokenize_api.h"

namespace invar::server {

// The answer body. Throws ApiError (400 naming the field, 404 for an unknown model).
std::string messages_count_tokens(const Backend& b, std::string_view body, const ModelCheck& known);

}  // namespace invar::server
