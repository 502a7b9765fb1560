// The chat-specific fields of a /v1/chat/completions body, validated into a ChatInput:
// messages (roles system, developer, user, assistant, tool; string, null or text-part content;
// assistant tool_calls and reasoning_content, or vLLM's newer name for it, reasoning;
// tool_call_id), tools, tool_choice, parallel_tool_calls, reasoning_effort (as
// chat_template_kwargs.enable_thinking and .reasoning_effort), chat_template_kwargs,
// add_generation_prompt and continue_final_message. Every rejection is a 400 naming the field.
// Values the template reads are kept as sent.
#pragma once

#include <nlohmann/json.hpp>

#include "server/chat_prompt.h"

namespace invar::server {

// Throws ApiError (400).
ChatInput chat_request_parse(const nlohmann::ordered_json& body);

}  // namespace invar::server
