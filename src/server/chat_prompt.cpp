#include "server/chat_prompt.h"

#include <cstdio>

#include "chat/chat_request.h"
#include "core/error.h"
#include "core/file_read.h"
#include "core/sha256.h"
#include "server/backend.h"
#include "tokenizer/control_text_guard.h"
#include "tokenizer/tokenizer.h"

namespace invar::server {
namespace {

using ojson = nlohmann::ordered_json;

// Every string and object key of `v` through `protect`.
ojson protect_strings(const ojson& v, const std::function<std::string(std::string_view)>& protect) {
  if (v.is_string()) return protect(v.get_ref<const std::string&>());
  if (v.is_array()) {
    ojson out = ojson::array();
    for (const ojson& x : v) out.push_back(protect_strings(x, protect));
    return out;
  }
  if (v.is_object()) {
    ojson out = ojson::object();
    for (auto it = v.begin(); it != v.end(); ++it)
      out[protect(it.key())] = protect_strings(it.value(), protect);
    return out;
  }
  return v;
}

// The text of the last message as the template wrote it (transformers' continue_final_message).
std::string final_message_text(const ojson& messages) {
  if (!messages.is_array() || messages.empty()) return "";
  const ojson& last = messages.back();
  if (!last.is_object() || !last.contains("content")) return "";
  const ojson& c = last["content"];
  if (c.is_string()) return c.get<std::string>();
  if (c.is_array() && !c.empty() && c.back().is_object() && c.back().contains("text") &&
      c.back()["text"].is_string())
    return c.back()["text"].get<std::string>();
  return "";
}

std::string strip(const std::string& s) {
  const char* ws = " \t\n\r";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

bool ends_in_open_think(const std::string& prompt) {
  size_t end = prompt.find_last_not_of(" \t\n\r");
  return end != std::string::npos && end + 1 >= 7 && prompt.compare(end + 1 - 7, 7, "<think>") == 0;
}

}  // namespace

chat::ToolCallSyntax tool_call_syntax_of(const std::string& source) {
  if (source.find("<function=") != std::string::npos) return chat::ToolCallSyntax::qwen3_xml;
  if (source.find("<tool_call>") != std::string::npos) return chat::ToolCallSyntax::hermes;
  return chat::ToolCallSyntax::none;
}

chat::ToolCallSyntax tool_call_syntax_parse(const std::string& name) {
  if (name == "hermes") return chat::ToolCallSyntax::hermes;
  if (name == "qwen3_xml") return chat::ToolCallSyntax::qwen3_xml;
  if (name == "none") return chat::ToolCallSyntax::none;
  throw Error("--tool-call-parser must be hermes, qwen3_xml or none, not '" + name + "'");
}

const char* tool_call_syntax_name(chat::ToolCallSyntax s) {
  switch (s) {
    case chat::ToolCallSyntax::hermes:
      return "hermes";
    case chat::ToolCallSyntax::qwen3_xml:
      return "qwen3_xml";
    case chat::ToolCallSyntax::none:
      break;
  }
  return "none";
}

ChatPrompt::ChatPrompt(ChatTemplateConfig cfg) : cfg_(std::move(cfg)) {
  try {
    template_ = std::make_unique<chat::Template>(cfg_.source);
  } catch (const chat::TemplateError& e) {
    throw Error("the chat template from " + cfg_.origin + " does not compile: " + e.what());
  }
  sha256_ = sha256_hex(cfg_.source);
  syntax_ = cfg_.tool_call_syntax.value_or(tool_call_syntax_of(cfg_.source));
  content_format_ = cfg_.content_format.value_or(chat::content_format_detect(cfg_.source));
  developer_as_system_ = cfg_.source.find("developer") == std::string::npos;
}

std::string ChatPrompt::describe() const {
  return cfg_.origin + " (sha256 " + sha256_.substr(0, 12) + ", " +
         std::to_string(cfg_.source.size()) +
         " bytes; tool calls: " + tool_call_syntax_name(syntax_) +
         "; reasoning: " + (cfg_.reasoning ? "auto" : "none") +
         "; content format: " + chat::content_format_name(content_format_) +
         (cfg_.content_format ? "" : " (detected)") + ")";
}

ChatRendered ChatPrompt::render(const ChatInput& in,
                                const std::function<std::string(std::string_view)>& protect) const {
  ojson req = in.request;
  if (protect) req = protect_strings(req, protect);
  if (developer_as_system_)
    for (auto& m : req["messages"])
      if (m.is_object() && m.value("role", "") == "developer") m["role"] = "system";
  ojson ctx = chat::chat_template_context(req, cfg_.bos_token, cfg_.eos_token, content_format_);
  if (in.continue_final_message) ctx["add_generation_prompt"] = false;
  ChatRendered out;
  try {
    out.text = template_->render(ctx);
  } catch (const chat::TemplateError& e) {
    throw Error(std::string("the chat template cannot render this request: ") + e.what());
  }
  if (in.continue_final_message) {
    // The prompt stops where the last message's text ends, so the model continues it.
    const std::string last = strip(final_message_text(req["messages"]));
    const size_t at = last.empty() ? std::string::npos : out.text.rfind(last);
    if (at == std::string::npos)
      throw Error(
          "continue_final_message: the final message does not appear in the rendered prompt");
    out.text.resize(at + last.size());
  }
  out.in_reasoning = ends_in_open_think(out.text);
  return out;
}

ChatTokens chat_encode(const ChatPrompt& prompt, const Tokenizer& tok,
                       const ControlTextGuard* guard, const ChatInput& in) {
  ChatTokens out;
  if (!guard) {
    ChatRendered r = prompt.render(in, nullptr);
    out.tokens = tok.encode(r.text, true);
    out.in_reasoning = r.in_reasoning;
    return out;
  }
  ControlTextGuard g = *guard;  // per request: the placeholders it hands out
  ChatRendered r = prompt.render(in, [&g](std::string_view s) { return g.protect(s); });
  out.tokens = g.encode(r.text);
  out.in_reasoning = r.in_reasoning;
  return out;
}

std::unique_ptr<ChatPrompt> chat_template_load(const Vocab& vocab, const Tokenizer& tok,
                                               const BackendOptions& opts) {
  ChatTemplateConfig c;
  if (!opts.chat_template_file.empty()) {
    c.source = file_read(opts.chat_template_file);
    c.origin = "--chat-template " + opts.chat_template_file;
  } else {
    c.source = vocab.chat_template;
    c.origin = "the model's tokenizer.chat_template";
  }
  if (c.source.empty()) {
    std::fprintf(stderr,
                 "invar: chat template: none (the model carries no "
                 "tokenizer.chat_template): chat requests get 400; pass --chat-template FILE\n");
    return nullptr;
  }
  if (vocab.bos_id >= 0 && vocab.bos_id < tok.n_vocab())
    c.bos_token = tok.token_bytes(vocab.bos_id);
  if (vocab.eos_id >= 0 && vocab.eos_id < tok.n_vocab())
    c.eos_token = tok.token_bytes(vocab.eos_id);
  c.tool_call_syntax = opts.tool_call_syntax;
  c.reasoning = opts.reasoning;
  c.content_format = opts.content_format;
  auto p = std::make_unique<ChatPrompt>(std::move(c));
  std::fprintf(stderr, "invar: chat template: %s\n", p->describe().c_str());
  return p;
}

VocabChat::VocabChat(const Tokenizer& tok, const BackendOptions& opts)
    : tok_(tok),
      guard_(opts.allow_special_in_content ? nullptr : std::make_unique<ControlTextGuard>(tok)),
      prompt_(chat_template_load(tok.vocab(), tok, opts)) {}

VocabChat::~VocabChat() = default;

ChatTokens VocabChat::encode(const ChatInput& in) const {
  if (!prompt_) throw Error("this model has no chat template");
  return chat_encode(*prompt_, tok_, guard_.get(), in);
}

}  // namespace invar::server
