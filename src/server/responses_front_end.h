// OpenAI's Responses API (POST /v1/responses) as a front end (front_end.h) onto the chat
// completions request: pure JSON translation, both ways.
//
// Request: `input` items (messages with text and image parts, function calls and their outputs,
// reasoning) and `instructions` become chat messages; `tools`, `tool_choice`, `text.format`,
// `reasoning.effort`, `max_output_tokens`, `top_logprobs`/`include` and the sampling fields
// their chat names; `previous_response_id` prepends the stored conversation (response_store.h).
// Refused with a 400 naming the field: hosted tools (only function tools run here), `background`
// (invar runs no background responses), any field the API does not define.
// Answer: the chat message becomes output items (reasoning, message, function_call); a chat
// stream becomes the typed events (response.created … response.completed), each with its
// sequence_number. A finished response asked to be stored (`store`, default true) is kept for
// GET /v1/responses/{id} and for the next `previous_response_id`.
// Costs: one parse and print of each chat chunk; a follow-up copies its stored conversation.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "server/front_end.h"
#include "server/response_store.h"

namespace invar::server {

class ResponsesFrontEnd : public FrontEnd {
 public:
  // `store`: where finished responses are kept and previous ones found (null: none).
  // `tenant`: whose they are.
  ResponsesFrontEnd(ResponseStore* store, std::string tenant);

  nlohmann::ordered_json chat_body(std::string_view body) override;
  HttpReply whole(int status, const std::string& chat_body) override;
  HttpReply error(const ApiError& e) const override;
  std::string stream(const std::string& sse, bool done) override;

  const std::string& id() const { return id_; }

 private:
  using ojson = nlohmann::ordered_json;
  enum class Open { none, reasoning, message, call };

  void emit(const char* type, ojson fields);
  void open(Open kind, ojson item);
  void close();
  void add_reasoning(const std::string& delta);
  void add_text(const std::string& delta, const ojson* logprobs);
  void add_call(const ojson& call, int64_t index);
  // The chat message (whole) or delta (stream) `m`, with its choice's logprobs.
  void feed(const ojson& m, const ojson* logprobs);
  void chunk(const ojson& c);
  void finish();
  void fail(const ojson& error);
  ojson response(const char* status) const;
  void keep(const ojson& resp);

  ResponseStore* store_;
  std::string tenant_;
  std::string id_;
  int64_t created_at_;
  ojson req_ = ojson::object();          // the Responses body, for the echo
  ojson conversation_ = ojson::array();  // previous items and this input, as items
  bool store_asked_ = true;

  // The answer so far.
  bool streaming_ = false;
  std::string out_;  // events not yet returned
  int64_t seq_ = 0;
  bool started_ = false, ended_ = false;
  ojson output_ = ojson::array();
  Open open_ = Open::none;
  int64_t call_index_ = -1;  // the chat tool call index of the open function_call
  std::string text_;         // the open item's text (reasoning, output text or arguments)
  ojson logprobs_ = ojson::array();
  std::string finish_reason_;
  std::string model_;
  ojson usage_;
  ojson error_;
  ojson final_;  // the finished response
};

// POST /v1/responses/input_tokens: the /tokenize body (tokenize_api.h, vLLM's chat shape) that
// the Responses body `body` means, so that the count is the chat's own. Throws ApiError.
nlohmann::ordered_json responses_tokenize_body(std::string_view body, ResponseStore* store,
                                               const std::string& tenant);
// Its answer, from /tokenize's answer.
std::string responses_input_tokens_json(const std::string& tokenize_answer);

// GET (the stored response) or DELETE (its removal) of /v1/responses/{id}; 404 in OpenAI's
// shape when `tenant` stored none of that id.
HttpReply responses_stored(const std::string& method, const std::string& id, ResponseStore* store,
                           const std::string& tenant);

}  // namespace invar::server
