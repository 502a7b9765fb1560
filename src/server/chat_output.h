// A chat completion's output as OpenAI shapes it: the generated text through the reasoning /
// tool-call parser (chat/output_parser.h), into `content`, `reasoning_content` (also as
// `reasoning`, vLLM's newer name) and `tool_calls`, for a whole message and for stream deltas
// alike.
//
// tool_choice: "none" parses no calls (the text stays content); "auto" parses them; "required"
// and a named function parse them too, but invar does not constrain decoding, so the model may
// write no call (or call another function). Then the request fails honestly: unmet() returns a
// 422 "tool_choice_unmet" error naming what was asked, never a plain answer passed off as done.
// A 4xx that clients do not retry: the same request and seed would write the same output.
//
// parallel_tool_calls: false returns the first tool call only, whole and streamed (vLLM's
// filter): the model still writes what it writes, and later calls are dropped from the output.
#pragma once

#include <optional>

#include "chat/output_parser.h"
#include "server/api_error.h"
#include "server/api_response.h"
#include "server/chat_prompt.h"

namespace invar::server {

class ChatOutput {
 public:
  ChatOutput(const ChatPrompt& prompt, const ChatInput& in, bool prompt_in_reasoning);

  chat::OutputDelta feed(const std::string& text) { return calls_limit(parser_.feed(text)); }
  chat::OutputDelta finish() { return calls_limit(parser_.finish()); }

  // The stream delta object for `d` (no role; fields only when they have something).
  static json delta_json(const chat::OutputDelta& d);
  // The whole assistant message, after finish().
  json message_json() const;
  // "tool_calls" when the model called a tool and stopped by itself, else `engine_reason`.
  std::string finish_reason(const std::string& engine_reason) const;
  // The error to report when tool_choice asked for a call the output does not hold.
  std::optional<ApiError> unmet() const;

 private:
  // The calls returned: the parser's, or the first of them without parallel_tool_calls.
  std::vector<chat::ToolCall> calls() const;
  chat::OutputDelta calls_limit(chat::OutputDelta d) const;

  chat::OutputParser parser_;
  bool parallel_;
  ToolChoice choice_;
  std::string choice_name_;
};

}  // namespace invar::server
