// A minimal OpenAI-compatible HTTP client: one non-streaming completion with top-k logprobs.
#pragma once

#include <memory>
#include <string>

#include "probe/completion.h"

namespace invar::probe {

struct Endpoint {
  std::string host_port;  // "http[s]://host[:port]" as cpp-httplib's client takes it
  std::string base_path;  // "" or a prefix such as "/proxy"; "/v1/..." is appended
};

// "http[s]://host[:port][/prefix][/v1]" -> Endpoint. Throws invar::Error for anything else.
Endpoint endpoint_parse(const std::string& url);

struct CompletionRequest {
  std::string system;  // "" for none
  std::string user;    // the task prompt
  int max_tokens = 32;
  int top_k = 20;
  std::string cache_salt;  // "" sends none
  std::string image_url;   // chat: an image part before the user text ("": none)
  json extra = json::object();
};

// The JSON body sent for `r` (exposed for tests).
json request_body(Api api, const std::string& model, const CompletionRequest& r);

class OpenAIClient {
 public:
  OpenAIClient(const std::string& url, Api api, std::string model, std::string api_key,
               double timeout_s);
  ~OpenAIClient();

  // One completion; throws invar::Error on a transport error, an HTTP status other than 200 or
  // an unparsable body.
  Completion complete(const CompletionRequest& r, json* raw_body = nullptr);
  // GET /health answers 200.
  bool healthy();
  // The first id of GET /v1/models, "" if that fails.
  std::string first_model();
  const std::string& model() const { return model_; }
  void set_model(std::string m) { model_ = std::move(m); }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Endpoint ep_;
  Api api_;
  std::string model_, api_key_;
};

}  // namespace invar::probe
