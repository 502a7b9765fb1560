// Anthropic's Messages API (POST /v1/messages) as a front end (front_end.h): its request becomes
// the chat completions body it means, and the chat answer (whole, or as its stream of chunks)
// becomes a message. Pure JSON translation; no model is needed to test it. The request's
// translation is messages_request.cpp; the answer's, the stream's and the errors' are
// messages_front_end.cpp.
//
//   request                             chat body
//   system: str | [text block]          a first "system" message
//   messages[].content: str | [block]   text → text part; image (base64 → data: URL, url) →
//                                       image_url part; tool_use → assistant tool_calls (input
//                                       → arguments JSON text); tool_result → a "tool" message
//                                       (is_error: the text begins "Error: "); thinking →
//                                       the assistant's reasoning_content; redacted_thinking:
//                                       accepted, not rendered (another model's encrypted text)
//   tools[] {name, description, input_schema}  function tools
//   tool_choice auto | any | tool | none       auto | required | named | none;
//                                              disable_parallel_tool_use → parallel_tool_calls
//   thinking {type: enabled | adaptive | disabled}  chat_template_kwargs.enable_thinking
//   stop_sequences, max_tokens (required), temperature (0..1), top_p, top_k, stream: the same
//   metadata.user_id                    user
//   cache_control on any block or tool: accepted and ignored (prefix caching is automatic)
//
//   answer: {"id": "msg_…", "type": "message", "role": "assistant", "model", "content":
//   [thinking, text, tool_use…], "stop_reason": end_turn | max_tokens | tool_use,
//   "stop_sequence": null, "usage": {input_tokens (uncached), output_tokens,
//   cache_read_input_tokens, cache_creation_input_tokens}}. The chat's finish_reason does not
//   say whether a stop string or the end-of-turn token ended the text: "stop" is end_turn.
//
//   stream: message_start, ping, then per block content_block_start / content_block_delta
//   (thinking_delta, text_delta, input_json_delta) / content_block_stop, then message_delta
//   (stop_reason and the whole usage: the prompt's count is known only at the end, so
//   message_start's usage holds zeros) and message_stop. A chat error chunk becomes an `error`
//   event; keep-alive comments pass unchanged.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "server/front_end.h"

namespace invar::server {

// The chat body an Anthropic request body means (messages_request.cpp). `count`: the body of
// /v1/messages/count_tokens (model, messages, system, tools, tool_choice, thinking only; no
// max_tokens), translated into the fields /tokenize renders. Throws ApiError naming the
// Anthropic field.
nlohmann::ordered_json messages_chat_body(std::string_view body, bool count = false);

// An error in Anthropic's shape: {"type": "error", "error": {"type", "message"}}, the type
// from the HTTP status (400 invalid_request_error, 401 authentication_error, 403
// permission_error, 404 not_found_error, 413 request_too_large, 429 rate_limit_error, 503 and
// 529 overloaded_error, else api_error).
nlohmann::ordered_json messages_error_json(int status, const std::string& message);

// The message for a chat completion answer (200's body).
nlohmann::ordered_json messages_answer_json(const nlohmann::ordered_json& chat);

class MessagesFrontEnd : public FrontEnd {
 public:
  nlohmann::ordered_json chat_body(std::string_view body) override;
  HttpReply whole(int status, const std::string& chat_body) override;
  HttpReply error(const ApiError& e) const override;
  std::string stream(const std::string& sse, bool done) override;

 private:
  enum class Block { none, thinking, text, tool_use };
  // One chat chunk's data (JSON text) as events.
  void chunk_take(const std::string& data, std::string* out);
  void block_open(Block kind, nlohmann::ordered_json start, std::string* out);
  void block_close(std::string* out);
  void finish(std::string* out);

  bool started_ = false;      // message_start sent
  bool ended_ = false;        // message_stop (or an error event) sent
  Block open_ = Block::none;  // the block open now
  int64_t index_ = -1;        // its index
  std::string finish_reason_;
  nlohmann::ordered_json usage_;  // the chat's usage chunk (null until it comes)
};

}  // namespace invar::server
