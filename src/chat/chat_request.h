// From an OpenAI chat-completions request body to the variables a chat template is rendered
// with, as transformers' apply_chat_template passes them: messages, tools (the request's list,
// empty or not; none when it offers none), documents (none), add_generation_prompt (default
// true), bos_token, eos_token and every key of chat_template_kwargs (but messages, tools and
// add_generation_prompt). As vLLM does before rendering, tool-call arguments sent as JSON strings
// are parsed into objects, and message content is made to fit the template's content format
// (chat/content_format.h: null content becomes "" or [], part arrays a string for "string").
#pragma once

#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

#include "chat/content_format.h"

namespace invar::chat {

// Throws invar::Error naming the bad field.
nlohmann::ordered_json chat_template_context(const nlohmann::ordered_json& request,
                                             const std::string& bos_token,
                                             const std::string& eos_token,
                                             ContentFormat content_format);

// "YYYY-MM-DD[THH:MM[:SS[.ffffff]]]" (a trailing Z or offset is accepted and ignored: the
// time is used as given). Throws invar::Error.
std::tm parse_iso8601(const std::string& text);

}  // namespace invar::chat
