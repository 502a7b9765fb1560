// How a chat template takes a message's content, and the messages made to fit it, as vLLM does
// (--chat-template-content-format: vllm/renderers/hf.py _detect_content_format; the messages:
// vllm/entrypoints/chat_utils.py _parse_chat_message_content).
//
// "openai": the template iterates content parts; "string": it only uses content as text.
// Detection walks the template's syntax tree as vLLM walks jinja2's:
//   1. `messages`, and every name set from a message-list name (directly, or through a filter,
//      a test or a slice: {% set loop_messages = messages[1:] %}), is a message list;
//   2. the target of a `for` over a message list is a message;
//   3. a `for` over a message's `content` (message.content, message['content'], through a
//      filter, test or slice), or over a bare name `content` (Qwen3.5 iterates the argument of
//      its render_content macro), makes the template "openai". None: "string".
// Where vLLM's walk meets a target that is not a plain name ({% set ns.x = messages %},
// {% for a, b in messages %}) its assertion ends the walk and the format is its default,
// "string"; so here.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace invar::chat {

enum class ContentFormat { string, openai };

// A template that does not compile is "string" (vLLM's default).
ContentFormat content_format_detect(const std::string& template_source);

// "auto" -> nullopt (detect), "string", "openai"; throws invar::Error naming the choices.
std::optional<ContentFormat> content_format_parse(const std::string& name);
const char* content_format_name(ContentFormat f);

// The messages as the template gets them (non-object messages are left alone):
//   string: content null or absent -> "" (what vLLM renders for a tool-call turn's null),
//           an array of parts -> the parts' texts joined by "\n" (vLLM's join);
//   openai: content null or absent -> [] (vLLM's empty part list); a string or a part array
//           as sent. vLLM wraps a string in one text part (the templates of tests/data render
//           the two alike) and, lately, joins a tool message's text parts with "\n" (Qwen3.5
//           concatenates them with none): kept as sent, every earlier rendering stays.
void content_format_apply(ContentFormat f, nlohmann::ordered_json& messages);

}  // namespace invar::chat
