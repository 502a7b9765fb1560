#include "server/chat_output.h"

namespace invar::server {
namespace {

chat::OutputParserOptions parser_options(const ChatPrompt& prompt, const ChatInput& in,
                                         bool prompt_in_reasoning) {
  chat::OutputParserOptions o;
  o.reasoning = prompt.reasoning();
  o.starts_in_reasoning = prompt.reasoning() && prompt_in_reasoning;
  o.tool_calls =
      in.tool_choice == ToolChoice::none ? chat::ToolCallSyntax::none : prompt.tool_call_syntax();
  if (in.request.contains("tools")) o.tools = in.request["tools"];
  return o;
}

}  // namespace

ChatOutput::ChatOutput(const ChatPrompt& prompt, const ChatInput& in, bool prompt_in_reasoning)
    : parser_(parser_options(prompt, in, prompt_in_reasoning)),
      parallel_(in.parallel_tool_calls),
      choice_(in.tool_choice),
      choice_name_(in.tool_choice_name) {}

std::vector<chat::ToolCall> ChatOutput::calls() const {
  std::vector<chat::ToolCall> c = parser_.tool_calls();
  if (!parallel_ && c.size() > 1) c.resize(1);
  return c;
}

chat::OutputDelta ChatOutput::calls_limit(chat::OutputDelta d) const {
  if (!parallel_) std::erase_if(d.tool_calls, [](const auto& c) { return c.index > 0; });
  return d;
}

json ChatOutput::delta_json(const chat::OutputDelta& d) {
  json delta = json::object();
  // Both names, as vLLM sends them while it renames reasoning_content to reasoning.
  if (!d.reasoning.empty()) {
    delta["reasoning_content"] = d.reasoning;
    delta["reasoning"] = d.reasoning;
  }
  if (!d.content.empty()) delta["content"] = d.content;
  if (!d.tool_calls.empty()) {
    json calls = json::array();
    for (const chat::ToolCallDelta& c : d.tool_calls) {
      json call = {{"index", c.index}};
      json fn = json::object();
      if (!c.id.empty()) {
        call["id"] = c.id;
        call["type"] = "function";
        fn["name"] = c.name;
      }
      fn["arguments"] = c.arguments;
      call["function"] = std::move(fn);
      calls.push_back(std::move(call));
    }
    delta["tool_calls"] = std::move(calls);
  }
  return delta;
}

json ChatOutput::message_json() const {
  json m = {{"role", "assistant"}};
  const std::vector<chat::ToolCall> calls = this->calls();
  // OpenAI sends null content beside tool calls; a plain answer keeps its (possibly empty) text.
  if (parser_.content().empty() && !calls.empty())
    m["content"] = nullptr;
  else
    m["content"] = parser_.content();
  if (!parser_.reasoning().empty()) {
    m["reasoning_content"] = parser_.reasoning();
    m["reasoning"] = parser_.reasoning();
  }
  if (!calls.empty()) {
    json out = json::array();
    for (const chat::ToolCall& c : calls)
      out.push_back({{"id", c.id},
                     {"type", "function"},
                     {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    m["tool_calls"] = std::move(out);
  }
  return m;
}

std::string ChatOutput::finish_reason(const std::string& engine_reason) const {
  if (engine_reason == "stop" && !calls().empty()) return "tool_calls";
  return engine_reason;
}

std::optional<ApiError> ChatOutput::unmet() const {
  if (choice_ != ToolChoice::required && choice_ != ToolChoice::named) return std::nullopt;
  const std::vector<chat::ToolCall> calls = this->calls();
  bool ok = !calls.empty();
  for (const chat::ToolCall& c : calls)
    if (choice_ == ToolChoice::named && c.name != choice_name_) ok = false;
  if (ok) return std::nullopt;
  std::string asked =
      choice_ == ToolChoice::named ? "a call of '" + choice_name_ + "' only" : "a tool call";
  ApiError e;
  // 422, not 5xx: clients (the OpenAI SDKs) retry 408, 409, 429 and 5xx, and a retry of the same
  // request with the same seed writes the same output again (DESIGN.md §1); a 5xx also counts as
  // an outage on dashboards. The request was well formed; what it demands was not delivered.
  e.status = 422;
  e.type = "unprocessable_entity_error";
  e.param = "tool_choice";
  e.code = "tool_choice_unmet";
  e.message = "tool_choice asked for " + asked + ", but the model wrote " +
              (calls.empty() ? std::string("no valid tool call")
                             : "a call of '" + calls.front().name + "'") +
              " (decoding is constrained to a call, so the output ended before one was complete: "
              "raise max_tokens; the same request with the same seed writes the same output)";
  return e;
}

}  // namespace invar::server
