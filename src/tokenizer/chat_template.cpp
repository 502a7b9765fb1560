#include "tokenizer/chat_template.h"

#include "core/error.h"

namespace invar {
namespace {

// Python's str.lstrip / rstrip / strip with a one-character set, as the template calls them.
std::string_view lstrip_nl(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}
std::string_view rstrip_nl(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}
std::string_view strip_nl(std::string_view s) {
  return lstrip_nl(rstrip_nl(s));
}

// s.split(sep)[0] and s.split(sep)[-1].
std::string_view before_first(std::string_view s, std::string_view sep) {
  const size_t i = s.find(sep);
  return i == std::string_view::npos ? s : s.substr(0, i);
}
std::string_view after_last(std::string_view s, std::string_view sep) {
  const size_t i = s.rfind(sep);
  return i == std::string_view::npos ? s : s.substr(i + sep.size());
}

bool is_tool_response(std::string_view c) {
  return c.starts_with("<tool_response>") && c.ends_with("</tool_response>");
}

void check_roles(const std::vector<ChatMessage>& messages, bool allow_any) {
  if (messages.empty()) throw Error("chat template: cannot render exactly: no messages");
  if (allow_any) return;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& r = messages[i].role;
    if (r != "system" && r != "user" && r != "assistant" && r != "tool") {
      throw Error("chat template: cannot render exactly: message " + std::to_string(i) +
                  " has role '" + r +
                  "', which the Qwen3 template drops (roles: system, user, assistant, tool)");
    }
  }
}

// Qwen3's template, branch by branch, for messages without tools, tool_calls or
// reasoning_content (chat_template_qwen3.cpp holds the text it reproduces).
std::string render_qwen3(const std::vector<ChatMessage>& m, const ChatOptions& opts) {
  std::string out;
  if (m[0].role == "system") out += "<|im_start|>system\n" + m[0].content + "<|im_end|>\n";

  // last_query_index: the last user message that is not a wrapped tool response.
  const size_t n = m.size();
  size_t last_query = n - 1;
  for (size_t k = n; k-- > 0;) {
    if (m[k].role == "user" && !is_tool_response(m[k].content)) {
      last_query = k;
      break;
    }
  }

  for (size_t i = 0; i < n; ++i) {
    const ChatMessage& msg = m[i];
    const bool first = i == 0, last = i + 1 == n;
    if (msg.role == "user" || (msg.role == "system" && !first)) {
      out += "<|im_start|>" + msg.role + "\n" + msg.content + "<|im_end|>\n";
    } else if (msg.role == "assistant") {
      std::string_view content = msg.content, reasoning;
      if (content.find("</think>") != std::string_view::npos) {
        const std::string_view full = msg.content;
        content = lstrip_nl(after_last(full, "</think>"));
        reasoning = lstrip_nl(after_last(rstrip_nl(before_first(full, "</think>")), "<think>"));
      }
      if (i > last_query && (last || !reasoning.empty())) {
        out += "<|im_start|>assistant\n<think>\n";
        out += strip_nl(reasoning);
        out += "\n</think>\n\n";
        out += lstrip_nl(content);
      } else {
        out += "<|im_start|>assistant\n";
        out += content;
      }
      out += "<|im_end|>\n";
    } else if (msg.role == "tool") {
      if (first || m[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + msg.content + "\n</tool_response>";
      if (last || m[i + 1].role != "tool") out += "<|im_end|>\n";
    }
    // A leading system message was written before the loop; the template skips it here.
  }
  if (opts.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (opts.enable_thinking.has_value() && !*opts.enable_thinking) {
      out += "<think>\n\n</think>\n\n";
    }
  }
  return out;
}

std::string render_chatml(const std::vector<ChatMessage>& m, const ChatOptions& opts) {
  std::string out;
  for (const ChatMessage& msg : m) {
    out += "<|im_start|>" + msg.role + "\n" + msg.content + "<|im_end|>\n";
  }
  if (opts.add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace

std::string_view chat_template_chatml_text() {
  return "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
         "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt "
         "%}{{ '<|im_start|>assistant\\n' }}{% endif %}";
}

ChatTemplate chat_template_identify(std::string_view tmpl) {
  if (tmpl == chat_template_qwen3_text()) return ChatTemplate::qwen3;
  if (tmpl == chat_template_chatml_text()) return ChatTemplate::chatml;
  if (tmpl.empty()) {
    throw Error(
        "chat template: the model declares no chat template; choose one explicitly "
        "(qwen3 or chatml)");
  }
  throw Error("chat template: cannot render exactly: the model's chat template (" +
              std::to_string(tmpl.size()) +
              " bytes) is not one invar implements (Qwen3's published template, plain ChatML)");
}

ChatTemplate chat_template_from_name(std::string_view name) {
  if (name == "qwen3") return ChatTemplate::qwen3;
  if (name == "chatml") return ChatTemplate::chatml;
  throw Error("chat template: unknown template name '" + std::string(name) + "' (qwen3, chatml)");
}

std::string_view chat_template_name(ChatTemplate t) {
  return t == ChatTemplate::qwen3 ? "qwen3" : "chatml";
}

std::string chat_render(ChatTemplate t, const std::vector<ChatMessage>& messages,
                        const ChatOptions& opts) {
  check_roles(messages, t == ChatTemplate::chatml);
  return t == ChatTemplate::qwen3 ? render_qwen3(messages, opts) : render_chatml(messages, opts);
}

std::string chat_render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  ChatOptions opts;
  opts.add_generation_prompt = add_generation_prompt;
  return chat_render(ChatTemplate::qwen3, messages, opts);
}

}  // namespace invar
