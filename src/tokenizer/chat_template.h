// Chat templates invar renders exactly, without a Jinja engine: a model's
// tokenizer.chat_template is compared with the templates below and rendered by code that
// reproduces it for the message shapes it accepts. Anything else is refused with an Error that
// says so; a prompt is never approximated.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace invar {

enum class ChatTemplate {
  qwen3,   // Qwen3's published template: ChatML + <think> handling (chat_template_qwen3.cpp)
  chatml,  // plain ChatML, as the tiny reference models carry it
};

struct ChatOptions {
  bool add_generation_prompt = true;
  // The template variable enable_thinking: nullopt leaves it undefined (thinking on). Qwen3's
  // template reads it only when adding the generation prompt; false appends an empty
  // <think></think> block.
  std::optional<bool> enable_thinking;
};

// Which template `tmpl` is (exact text). Throws invar::Error "cannot render exactly" for any
// other text, and for an empty one (the model declares no template).
ChatTemplate chat_template_identify(std::string_view tmpl);
// Accepts the names "qwen3" and "chatml".
ChatTemplate chat_template_from_name(std::string_view name);
std::string_view chat_template_name(ChatTemplate t);
std::string_view chat_template_qwen3_text();
std::string_view chat_template_chatml_text();

// Renders as the template does with `messages`, add_generation_prompt and enable_thinking, no
// tools, under transformers' Jinja settings (trim_blocks, lstrip_blocks). Throws invar::Error
// for what it cannot render exactly: no messages, or a role the template would drop.
std::string chat_render(ChatTemplate t, const std::vector<ChatMessage>& messages,
                        const ChatOptions& opts);

// Messages from JSON text: an OpenAI-style array [{"role", "content"}] or an object holding
// one under "messages". Content must be a string; fields that change what Qwen3's template
// renders (tools, tool_calls, reasoning_content, content parts) are refused with an Error
// naming them, since chat_render does not take them.
std::vector<ChatMessage> chat_messages_from_json(std::string_view json_text);

}  // namespace invar
