// The `n` choices of one request: one CompletionJob (one engine request) per choice, merged
// into one response or one stream. The request is one unit: one admission slot, one
// submit_group (one place in the engine's queue, one party to its fairness), one rendering and
// tokenisation of the prompt, one prefill (the engine's), and its prompt logprobs computed once
// (choice 0's) and repeated in every choice. Its whole work is bounded first: n × (prompt +
// max_tokens) tokens and the logprob candidates it would return, against RequestBudget. Choice i
// samples with seed + i (mod 2^64), so that any choice can be reproduced alone by a request with n
// = 1 and that seed; a request without a seed gets a random one (reported in the request log). The
// choices share the response id, and the stream carries each choice's `index`. Usage counts the
// prompt once (choice 0's prompt and cached tokens) and sums the completion tokens.
// prompt_logprobs, when asked for, also reach streams: in each choice's first chunk, as vLLM sends
// them.
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

// What one request may ask for (invar serve --max-request-tokens, --max-request-logprobs).
struct RequestBudget {
  int64_t tokens = 0;    // n × (prompt + max_tokens)
  int64_t logprobs = 0;  // n × (max_tokens × top logprobs + prompt × prompt logprobs)
};

class CompletionChoices {
 public:
  // Tokenises the prompt once (its images encoded under `images`), checks it against the model
  // and the request against `budget`, and builds every choice's job. Throws ApiError.
  CompletionChoices(Backend& backend, ApiRequest req, ServerMetrics& metrics,
                    const RequestBudget& budget, const ImageBounds& images = {});
  ~CompletionChoices();  // releases the admission slot
  // Admits the request (one slot; 429 when its client already has `client_limit` requests in
  // flight, or the server `queue_limit`) and submits its choices as one group. Throws ApiError.
  void start(int64_t queue_limit, int64_t client_limit, std::function<void()> notify);

  // Whole response, once every choice has finished.
  std::optional<std::pair<int, std::string>> poll_whole();
  bool ready();  // some choice has events waiting
  // The SSE text the waiting events make (an SSE comment as keep-alive when none). Never blocks.
  std::string stream_next();
  bool stream_done() const { return done_; }
  void cancel_by_client();

  const ApiRequest& request() const { return req_; }
  uint64_t seed() const { return req_.sampling.seed; }
  std::string id() const;  // the response id
  JobStats stats() const;  // the request's totals, counted as its usage is
  // CPU the tower's workers spent on the request's images (JobPrompt::image_pool_cpu_s).
  double image_pool_cpu_seconds() const { return image_pool_cpu_s_; }

 private:
  std::string rewrite_chunk(size_t choice, const std::string& data);
  std::string usage_chunk();
  void budget_check(const RequestBudget& budget) const;

  Backend& backend_;
  ServerMetrics& metrics_;
  bool admitted_ = false;
  bool client_slot_ = false;  // holds one of metrics_.inflight_by_client's slots
  double image_pool_cpu_s_ = 0;
  ApiRequest req_;  // without the prompt (choice 0 holds it)
  std::vector<std::unique_ptr<CompletionJob>> jobs_;
  std::vector<std::optional<std::pair<int, std::string>>> whole_;
  std::vector<bool> first_sent_;
  json envelope_;          // the first chunk seen: id, object, created, model, fingerprint
  int64_t n_prompts_ = 1;  // /v1/completions' list of prompts (ApiRequest::more_prompts)
  bool done_ = false;
};

}  // namespace invar::server
