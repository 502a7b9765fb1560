// One completion request from admission to its last byte: tokenise and validate against the
// model, submit to the engine, turn the engine's events (delivered on the engine thread) into
// the response body or its stream of SSE chunks. Whole and streamed responses are built from
// the same event processing, so both carry identical tokens and logprobs.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/api_request.h"
#include "server/api_response.h"
#include "server/backend.h"
#include "server/chat_output.h"
#include "server/server_metrics.h"

namespace invar::server {

// Filled on the engine thread by the EventSink, drained on the HTTP thread. Shared, because the
// engine may still deliver a late event after the HTTP side has gone.
struct EventQueue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<RequestEvent> events;
  std::function<void()> notify;  // set before submit; called after each event, must not block
  ServerMetrics* metrics = nullptr;
  std::chrono::steady_clock::time_point submitted, last_token, first_token;
  bool any_token = false;
};

// What the request log reports of one engine request.
struct JobStats {
  Usage usage;
  double ttft_s = -1;  // submit → first token; -1: no token
  double duration_s = 0;
};

// A request's prompt tokens, made once for all its choices.
struct JobPrompt {
  std::vector<int32_t> tokens;
  bool in_reasoning = false;  // chat: the prompt ends inside an open <think> block
  // Structured output (ApiRequest::constraint), compiled: null when unconstrained. It starts
  // after grammar_after (</think> when the prompt ends inside a reasoning block), else at once.
  std::shared_ptr<const grammar::Grammar> grammar;
  int32_t grammar_after = -1;
  // The images placed in `tokens` (ApiRequest::image_files encoded, one pad widened per
  // merged row); null: none. image_pool_cpu_s: the CPU their encoding took on threads other
  // than the preparing one (the tower's workers), which --prepare-cpu-seconds counts as well.
  std::shared_ptr<const SeqImages> images;
  double image_pool_cpu_s = 0;
};

// What bounds the encoding of a request's images (invar serve): the tower stops between its
// units once the client is gone or the request's preparation has spent its CPU budget.
struct ImageBounds {
  std::shared_ptr<const std::atomic<bool>> cancelled;  // true once the client is gone; null: never
  double cpu_start_s = 0;   // the preparing thread's thread_cpu_seconds() when preparation began
  double cpu_budget_s = 0;  // --prepare-cpu-seconds; <= 0: unbounded
};

// Renders (chat) and tokenises the prompt, truncates it (truncate_prompt_tokens), checks its
// ids against the vocabulary and compiles the output constraint (grammar/compile.h: bounded
// time and memory, cached by content hash). Images: their token counts from their headers are
// checked against the context first, then they are encoded under `bounds`. Throws ApiError
// (400) naming the field at fault.
JobPrompt job_prompt_make(const Backend& backend, const ApiRequest& req,
                          const ImageBounds& bounds = {});

class CompletionJob {
 public:
  // Checks the prompt against the model (context length). Throws ApiError. `first`: the
  // request's first choice, for the later ones: they take its prompt logprobs (computed once)
  // and its prompt text (an echo), so their `req` need not carry the prompt.
  CompletionJob(Backend& backend, ApiRequest req, ServerMetrics& metrics, JobPrompt prompt,
                const CompletionJob* first = nullptr);
  ~CompletionJob();  // cancels a request still running
  CompletionJob(const CompletionJob&) = delete;
  CompletionJob& operator=(const CompletionJob&) = delete;

  // What to submit to the engine for this choice, and the sink that feeds this job. `notify`
  // is called on the engine thread after each event: it must not block.
  std::pair<GenerationRequest, EventSink> engine_request(std::function<void()> notify);
  void submitted(RequestId id);  // the engine took it under this id
  int64_t prompt_size() const { return int64_t(prompt_.size()); }
  int64_t max_tokens() const { return max_tokens_; }
  int64_t prompt_logprobs_k() const { return prompt_lp_k_; }  // asked of the engine (-1: none)
  // The prompt logprobs have all arrived (they precede the first token).
  bool prompt_logprobs_complete() const;

  // Whole response without waiting: (status, body) once the engine has finished, else nothing.
  std::optional<std::pair<int, std::string>> poll_whole();
  bool ready();  // events are waiting to be processed

  // Streaming: waits up to `wait` for events and returns the SSE text they make (an SSE comment
  // as keep-alive when nothing happened, so a vanished client is noticed by the failed write).
  std::string stream_next(std::chrono::milliseconds wait);
  bool stream_done() const { return stream_done_; }
  // The client went away: cancel the engine request (its blocks are freed by the engine).
  void cancel_by_client();

  const ApiRequest& request() const { return req_; }
  JobStats stats() const;
  // vLLM's prompt_logprobs value of the events seen so far (complete by the first token).
  json prompt_logprobs_value() const;

 private:
  struct Delta {
    std::string text;
    std::vector<TokenOut> tokens;
    bool finished = false;
  };
  void process(RequestEvent&& ev, Delta& d);
  void wait_events(std::vector<RequestEvent>& out, std::chrono::milliseconds wait, bool forever);
  json logprobs_value(const std::vector<TokenOut>& tokens, int64_t* offset);
  std::string prompt_echo_text() const;
  Usage usage() const;
  const std::vector<TokenOut>& prompt_lp() const {
    return first_ ? first_->prompt_lp_ : prompt_lp_;
  }

  Backend& backend_;
  ApiRequest req_;
  ServerMetrics& metrics_;
  ResponseContext ctx_;
  std::vector<int32_t> prompt_;
  std::vector<int32_t> eos_ids_;
  std::shared_ptr<const grammar::Grammar> grammar_;  // structured output (null: none)
  int32_t grammar_after_ = -1;
  std::shared_ptr<const SeqImages> images_;  // null: text only
  int64_t max_tokens_ = 0;
  int64_t prompt_lp_k_ = -1;  // prompt logprobs asked of the engine (-1: none)
  const CompletionJob* first_ = nullptr;

  std::unique_ptr<ChatOutput> chat_out_;  // chat: content, reasoning and tool calls

  std::shared_ptr<EventQueue> queue_;
  RequestId rid_ = 0;
  bool submitted_ = false, engine_finished_ = false;
  std::chrono::steady_clock::time_point start_time_, end_time_;

  std::vector<TokenOut> tokens_, prompt_lp_;
  std::string finish_reason_;
  RequestEvent finished_;
  std::optional<ApiError> error_;
  Delta whole_;  // poll_whole's progress

  // Streaming progress.
  bool stream_started_ = false, stream_done_ = false;
  int64_t stream_offset_ = 0;
};

}  // namespace invar::server
