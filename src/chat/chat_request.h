// From an OpenAI chat-completions request body to the variables a chat template is rendered
// with, as transformers' apply_chat_template passes them: messages, tools (when the request
// offers any), add_generation_prompt (default true), bos_token, eos_token and every key of
// chat_template_kwargs. Tool-call arguments sent as JSON strings are parsed into objects first,
// as vLLM does before rendering.
#pragma once

#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

namespace invar::chat {

// Throws invar::Error naming the bad field.
nlohmann::ordered_json chat_template_context(const nlohmann::ordered_json& request,
                                             const std::string& bos_token,
                                             const std::string& eos_token);

// "YYYY-MM-DD[THH:MM[:SS[.ffffff]]]" (a trailing Z or offset is accepted and ignored: the
// time is used as given). Throws invar::Error.
std::tm parse_iso8601(const std::string& text);

}  // namespace invar::chat
