// A front end other than OpenAI's chat and completions (Anthropic's Messages, OpenAI's
// Responses): a translator between its wire format and a chat completions request and answer.
//
// The request becomes the chat body it means, which is then parsed, validated, rendered and run
// as every chat is (api_request_parse, request_check, the template): one request surface, so
// the same conversation gives the same tokens and the same bits through every front end. The
// chat answer, whole or as its stream of chunks, is rewritten in the front end's shape. Costs: one
// JSON parse and print per answer or chunk, beside a model step each.
//
// One object per request (a stream's translation keeps state: the blocks opened so far, the
// usage seen); called on one thread at a time.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "server/api_error.h"
#include "server/http_transport.h"

namespace invar::server {

class FrontEnd {
 public:
  virtual ~FrontEnd() = default;

  // The chat completions body `body` means (n = 1; a stream asks for usage). Throws ApiError
  // naming the front end's own fields.
  virtual nlohmann::ordered_json chat_body(std::string_view body) = 0;

  // The whole answer, from the chat's status and JSON body (an error body when status ≥ 400).
  virtual HttpReply whole(int status, const std::string& chat_body) = 0;

  // An error raised before the request ran (its body, auth, model, admission), in this front
  // end's shape.
  virtual HttpReply error(const ApiError& e) const = 0;

  // The front end's SSE text for the chat SSE text `sse`: whole events ("data: …\n\n", the
  // final "data: [DONE]\n\n", or a keep-alive comment line). `done`: the chat stream has ended
  // (its last text is in `sse`).
  virtual std::string stream(const std::string& sse, bool done) = 0;
};

class ResponseStore;

// What a front end may need beside the body: who asks, and the server's state it keeps.
struct FrontEndContext {
  std::string tenant;                  // the API key's tenant (tenants.h); "" without auth
  ResponseStore* responses = nullptr;  // OpenAI Responses' store (response_store.h)
};

// The front end that serves `path` (POST), or null when the path is chat's, completions' or
// not a front end's.
std::unique_ptr<FrontEnd> front_end_for(std::string_view path, const FrontEndContext& ctx);

}  // namespace invar::server
