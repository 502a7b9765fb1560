// The chat template the server renders every chat with: the model's own
// (tokenizer.chat_template) or the file given by --chat-template, compiled once by src/chat.
//
// A chat request becomes template variables as transformers' apply_chat_template makes them
// (chat/chat_request.h). Before rendering, every string the client sent (message contents,
// names, tool definitions, tool-call arguments, chat_template_kwargs; keys as well as values)
// goes through the ControlTextGuard, so that text spelling a control token stays text
// (tokenizer/control_text_guard.h); bos_token and eos_token are the template's own.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "chat/content_format.h"
#include "chat/output_parser.h"
#include "chat/template.h"

namespace invar {
class Tokenizer;
class ControlTextGuard;
}  // namespace invar

namespace invar::server {

enum class ToolChoice { auto_, none, required, named };

// An image content part: where the image is, and the field that named it (for errors).
struct ChatImage {
  std::string url;    // data:, file:// or http(s):// as sent (image_source.h reads it)
  std::string field;  // "messages[1].content[0].image_url.url"
};

// A chat request's input to the template, validated by api_request_parse.
struct ChatInput {
  // {"messages", "tools"?, "add_generation_prompt"?, "chat_template_kwargs"?} as the client
  // sent them (object keys in their order).
  nlohmann::ordered_json request = nlohmann::ordered_json::object();
  bool continue_final_message = false;  // the prompt ends inside the last message
  ToolChoice tool_choice = ToolChoice::auto_;
  std::string tool_choice_name;     // ToolChoice::named
  bool parallel_tool_calls = true;  // false: the first tool call only is returned
  std::string reasoning_effort;     // as sent ("" absent); already in chat_template_kwargs
  // Image parts in the order they appear; in `request` each is replaced by {"type": "image"},
  // the part Qwen3.5's template (and HF processors') render as the vision tokens, so that the
  // template never walks a multi-megabyte data URL.
  std::vector<ChatImage> images;
};

struct ChatTemplateConfig {
  std::string source;  // the template text
  std::string origin;  // where it came from, for the log and errors
  std::string bos_token, eos_token;
  // Overrides of what the template implies (nullopt: from the template).
  std::optional<chat::ToolCallSyntax> tool_call_syntax;
  bool reasoning = true;                              // --reasoning-format none: false
  std::optional<chat::ContentFormat> content_format;  // nullopt: detected from the template
};

struct ChatRendered {
  std::string text;           // the prompt, client strings still guarded (placeholders)
  bool in_reasoning = false;  // the prompt ends inside an open <think> block
};

class ChatPrompt {
 public:
  explicit ChatPrompt(ChatTemplateConfig cfg);  // throws invar::Error for a template syntax error

  // `protect` maps each client string (null: trusted clients, strings as sent). Throws
  // invar::Error for what the template refuses (raise_exception) or cannot render.
  ChatRendered render(const ChatInput& in,
                      const std::function<std::string(std::string_view)>& protect) const;

  const std::string& origin() const { return cfg_.origin; }
  const std::string& source() const { return cfg_.source; }  // the template text (/props)
  const std::string& sha256() const { return sha256_; }      // hex of the template text
  chat::ToolCallSyntax tool_call_syntax() const { return syntax_; }
  chat::ContentFormat content_format() const { return content_format_; }
  bool reasoning() const { return cfg_.reasoning; }
  // The template reads enable_thinking (Qwen3's switch), which reasoning_effort sets.
  bool thinking_switch() const { return cfg_.source.find("enable_thinking") != std::string::npos; }
  std::string describe() const;  // one line for the startup log

 private:
  ChatTemplateConfig cfg_;
  std::unique_ptr<chat::Template> template_;
  std::string sha256_;
  chat::ToolCallSyntax syntax_;
  chat::ContentFormat content_format_;
  // The template never names the developer role (Qwen's templates raise on a role they do not
  // know): developer messages are rendered as system, OpenAI's own mapping of the role.
  bool developer_as_system_ = false;
};

// The tool-call form a template teaches the model: the XML form if it writes <function=,
// otherwise the JSON form if it mentions <tool_call>, else none.
chat::ToolCallSyntax tool_call_syntax_of(const std::string& template_source);
// "hermes" | "qwen3_xml" | "none"; throws invar::Error naming the choices.
chat::ToolCallSyntax tool_call_syntax_parse(const std::string& name);
const char* tool_call_syntax_name(chat::ToolCallSyntax s);

struct ChatTokens {
  std::vector<int32_t> tokens;
  bool in_reasoning = false;
};
// Renders and tokenises with a real vocabulary: guarded unless `guard` is null (trusted
// clients, --allow-special-in-content), in which case control spellings anywhere are tokens.
ChatTokens chat_encode(const ChatPrompt& prompt, const Tokenizer& tok,
                       const ControlTextGuard* guard, const ChatInput& in);

}  // namespace invar::server
