// The `n` choices of one request: one CompletionJob (one engine request) per choice, merged
// into one response or one stream. Choice i samples with seed + i (mod 2^64), so that any choice
// can be reproduced alone by a request with n = 1 and that seed; a request without a seed gets
// a random one (reported in the request log). The choices share the response id, and the stream
// carries each choice's `index`. Usage counts the prompt once (choice 0's prompt and cached
// tokens) and sums the completion tokens. prompt_logprobs, when asked for, also reach streams:
// in each choice's first chunk, as vLLM sends them.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/completion_job.h"

namespace invar::server {

class CompletionChoices {
 public:
  // Builds every choice's job (tokenised and checked against the model). Throws ApiError.
  CompletionChoices(Backend& backend, ApiRequest req, ServerMetrics& metrics);
  // Admits and submits every choice (each holds one admission slot). Throws ApiError.
  void start(int64_t queue_limit, std::function<void()> notify);

  // Whole response, once every choice has finished.
  std::optional<std::pair<int, std::string>> poll_whole();
  bool ready();  // some choice has events waiting
  // The SSE text the waiting events make (an SSE comment as keep-alive when none). Never blocks.
  std::string stream_next();
  bool stream_done() const { return done_; }
  void cancel_by_client();

  const ApiRequest& request() const { return req_; }
  uint64_t seed() const { return req_.seed; }
  std::string id() const;  // the response id
  JobStats stats() const;  // the request's totals, counted as its usage is

 private:
  std::string rewrite_chunk(size_t choice, const std::string& data);
  std::string usage_chunk();

  ApiRequest req_;
  std::vector<std::unique_ptr<CompletionJob>> jobs_;
  std::vector<std::optional<std::pair<int, std::string>>> whole_;
  std::vector<bool> first_sent_;
  json envelope_;  // the first chunk seen: id, object, created, model, fingerprint
  bool done_ = false;
};

}  // namespace invar::server
