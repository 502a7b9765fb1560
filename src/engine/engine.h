// The engine: request lifecycle, continuous batching with chunked prefill, the prefix cache
// with recurrent-state checkpoints at block boundaries (rule N5), sampling. One engine thread
// owns compute; callers submit and cancel from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cache/prefix_cache.h"
#include "cache/tier_config.h"
#include "core/error.h"
#include "engine/drafter.h"
#include "model/model.h"
#include "model/seq_images.h"

namespace invar {

class Tokenizer;  // tokenizer/tokenizer.h
namespace grammar {
class Grammar;  // grammar/grammar.h
}

struct EngineConfig {
  int64_t block_size = 64;          // --block-size: tokens per KV block / prefix-cache unit
  int64_t checkpoint_every = 1;     // --checkpoint-every: state checkpoint every N blocks
  int64_t cache_bytes = 1ll << 30;  // --cache-bytes: budget for cached KV blocks + checkpoints
  bool prefix_cache = true;         // --no-prefix-cache turns lookups and inserts off
  int64_t max_batch_tokens = 512;   // --max-batch-tokens: tokens per engine step
  int64_t max_running = 64;         // --max-num-seqs: requests computing at once
  int64_t fair_ratio = 1;           // --fair-ratio: a request computes at most this many times
                                    // the sequences per step of the smallest competing one
                                    // (engine/fair_share.h; 0: no bound)
  int64_t seat_quantum = 32;        // --seat-quantum: steps a request holds a seat before it
                                    // yields it to one that finds every seat taken (0: never)
  int64_t client_max_running = 0;   // --client-max-running: seats one client may hold (0: no cap)
  int64_t max_queue = 1024;         // waiting requests before submit() refuses (overloaded)
  int threads = 0;                  // --threads (0: hardware concurrency)
  int64_t n_ctx = 0;                // context limit per request (0: the model's n_ctx_train)
  std::string spec = "none";        // --spec: drafter name (engine/drafter.h), "none": off
  DrafterConfig draft;              // --spec-tokens, --spec-ngram-min/max
  TierConfig tiers;                 // --cache-dir, --cache-redis: lower cache tiers (off: none)
  std::string fingerprint;          // system_fingerprint: addresses the lower tiers' records
  bool mask_overlap = true;         // grammar masks computed while the forward pass runs
                                    // (engine/mask_prefetch.h); off: after it (same bits)
  // --grammar-state-bytes: the matcher state of every constrained sequence together; each of
  // max_running gets an equal share (grammar::Limits::max_state_bytes), and one that needs more
  // ends with invalid_request. 0: no bound.
  int64_t grammar_state_bytes = int64_t{256} << 20;
  // --start-after-requests (tests only): the engine takes no step until it has admitted this
  // many requests, so that concurrent requests of a test share every step from the first by
  // construction, however slowly their clients arrive (0: steps start with the first request).
  int64_t start_after_requests = 0;
};

// What went wrong with a request, for the caller to map onto its own protocol (the server: HTTP
// statuses). Everything but `internal` is the caller's doing or a passing condition.
enum class ErrorKind {
  invalid_request,   // a field out of range or inconsistent: fix the request
  context_overflow,  // prompt + max_tokens beyond the context limit or the KV cache budget
  overloaded,        // the waiting queue is full: retry later
  shutting_down,     // the engine is draining or stopped
  internal,          // a bug in invar (a failed forward pass)
  nonfinite,         // the model computed a NaN or Inf logit for this request (damaged weights)
};

class EngineError : public Error {
 public:
  EngineError(ErrorKind kind, std::string param, const std::string& message)
      : Error(message), kind_(kind), param_(std::move(param)) {}
  ErrorKind kind() const { return kind_; }
  const std::string& param() const { return param_; }  // the request field at fault, or ""

 private:
  ErrorKind kind_;
  std::string param_;
};

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy (argmax, ties to the smaller id)
  float top_p = 1.0f;
  int64_t top_k = 0;   // 0: off
  float min_p = 0.0f;  // drop candidates with probability < min_p × the best's (0: off)
  uint64_t seed = 0;   // counter-based RNG keyed by (seed, position)
  // Applied to the logits before selection, greedy included, in vLLM's order (engine/penalties.h):
  // a pure function of the request's tokens. Logprobs stay those of the model's own logits.
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, added to its logit)
  float repetition_penalty = 1.0f;  // > 0: a seen token's l > 0 ? l / r : l × r (1: off)
  int64_t repetition_last_n = -1;   // the tokens it sees: the last N of prompt + output (-1: all)
  float frequency_penalty = 0.0f;   // l −= f × (the token's count in the output)
  float presence_penalty = 0.0f;    // l −= p when the token is in the output
};

struct GenerationRequest {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int64_t max_tokens = 16;
  std::vector<int32_t> stop_tokens;       // finish "stop" when generated (not part of the text)
  std::vector<std::string> stop_strings;  // finish "stop" when the text contains one (the
                                          // text ends just before it)
  std::string cache_salt;                 // isolates the prefix cache (first block's key)
  // Images in the prompt (null: text only): their pad slots take the tower's rows, every slot
  // its IMROPE position. The prefix cache keys image slots by their pixels' hash: blocks before
  // the first image are shared with any request, blocks from it on only with requests holding
  // the same images at the same slots.
  std::shared_ptr<const SeqImages> images;
  int64_t top_logprobs = 0;          // 0..20 candidates per generated token
  int64_t prompt_logprobs = -1;      // ≥ 0: logprob of each prompt token ≥ 1 (+ K candidates);
                                     // forces those positions to be computed (no cache skip)
  bool capture_logits = false;       // tests: raw logits of every computed position
  bool skip_special_tokens = false;  // control tokens (<|im_end|>) add no text (vLLM's default)
  // Fairness (engine/fair_share.h): the engine's slots are shared equally across clients, then
  // across a client's requests. Neither changes a logit (scheduling decides when, never how).
  std::string client_key;  // who asks ("" is one client like any other)
  int64_t priority = 0;    // vLLM's priority: among one client's requests, lower goes first
  // Structured output (engine/constraint.h): every generated token is one the grammar allows,
  // an end-of-sequence id only once the output is complete, and the request ends when one is
  // generated. Like logit_bias it shapes selection, not the logits: logprobs stay the model's.
  // Needs a tokenizer. null: unconstrained.
  std::shared_ptr<const grammar::Grammar> grammar;
  int32_t grammar_after = -1;  // the grammar starts after this token (</think>); -1: at once
};

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;
};

enum class EventKind { token, prompt_logprobs, finished };
enum class FinishReason { none, stop, length, cancelled, error };

struct RequestEvent {
  EventKind kind = EventKind::token;
  // token: the generated token, its logprob and the top candidates (value desc, id asc).
  int32_t token = 0;
  float logprob = 0;
  std::vector<TokenLogprob> top;
  // token: one of stop_tokens; it ends the request and is not part of the completion.
  bool stop_token = false;
  // With a tokenizer, the completion's text as it becomes final: token: the bytes this token
  // releases (whole UTF-8 characters only, held back while they may begin a stop string, cut
  // just before a completed one); finished: whatever was still held back.
  std::string text;
  int64_t position = 0;  // absolute position of the token (prompt_logprobs: of the prompt token)
  // capture_logits: logits rows for computed positions, as (position, [V] floats).
  std::vector<std::pair<int64_t, std::vector<float>>> logits;
  // finished:
  FinishReason finish = FinishReason::none;
  std::string error;  // finish == error: what happened, and what kind of failure it was
  ErrorKind error_kind = ErrorKind::internal;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t draft_tokens = 0;           // speculative decoding: drafts verified by the trunk
  int64_t accepted_draft_tokens = 0;  // of them, those that became part of the completion
  bool speculative = false;           // the engine runs a drafter (--spec other than none)
};

// Called on the engine thread, in order, for one request; must not block for long.
using EventSink = std::function<void(RequestEvent&&)>;
using RequestId = uint64_t;

struct EngineMetrics {
  uint64_t requests_total = 0, requests_running = 0, requests_waiting = 0;
  uint64_t groups_waiting = 0;  // submit_group units (a request's n choices) with one waiting
  uint64_t prompt_tokens_total = 0, cached_tokens_total = 0, generated_tokens_total = 0;
  uint64_t cache_lookups = 0, cache_hits = 0;
  uint64_t resident_blocks = 0, resident_checkpoints = 0, resident_bytes = 0;
  uint64_t referenced_blocks = 0;  // blocks held by running requests (0 when idle)
  uint64_t cache_table_bytes = 0;  // the cache's per-id tables (CacheStats::bytes_tables)
  uint64_t evictions = 0, preemptions = 0;
  uint64_t seat_rotations =
      0;  // preemptions that made a seat for a waiting request after a quantum
  double tokens_per_s = 0;
  // Speculative decoding (all 0 with --spec none): drafts verified, drafts kept, verification
  // chunks run, and spec_accepted_hist[i] = verification chunks that kept i drafts (i ≤ k).
  uint64_t spec_drafted_total = 0, spec_accepted_total = 0, spec_verifications_total = 0;
  std::vector<uint64_t> spec_accepted_hist;
  // Grammar masks computed while the forward pass ran (EngineConfig::mask_overlap).
  uint64_t grammar_masks_prefetched = 0;
  TiersReport tiers;  // lower cache tiers (empty without --cache-dir / --cache-redis)
};

class Engine {
 public:
  // Starts the engine thread. The model must outlive the engine. tokenizer may be null (then
  // stop_strings are refused at submit).
  Engine(const Model& model, const Tokenizer* tokenizer, EngineConfig cfg);
  // With the caller's drafter (tests, benchmarks) in place of the one cfg.spec names; null:
  // speculation off.
  Engine(const Model& model, const Tokenizer* tokenizer, EngineConfig cfg,
         std::unique_ptr<Drafter> drafter);
  ~Engine();  // cancels everything and joins
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates (empty prompt, ids out of range, prompt + max_tokens over n_ctx, queue full) and
  // throws EngineError with a message naming the problem; otherwise queues the request.
  RequestId submit(GenerationRequest req, EventSink sink);
  // The n choices of one request, all or none: one place in the queue (max_queue counts
  // groups) and one party to fairness (client and priority are the first choice's). Choices
  // with the first one's prompt and cache salt wait until it has computed the prompt, then take
  // it from the prefix cache (a hit is bit-identical to computing it, C1): the prompt is
  // prefilled once, not n times. sinks[i] receives choice i's events.
  std::vector<RequestId> submit_group(std::vector<GenerationRequest> reqs,
                                      std::vector<EventSink> sinks);
  void cancel(RequestId id);
  EngineMetrics metrics() const;
  const EngineConfig& config() const;
  int64_t n_ctx() const;                    // the context limit every request is checked against
  const CacheBudget& cache_budget() const;  // fixed at construction
  // Tests: the prefix cache, to read only while no request is in flight (after the last
  // request's finished event, before the next submit).
  const PrefixCache& prefix_cache() const;
  std::string tiers_describe() const;  // the lower tiers for the start-up log ("" if none)
  // Stops admitting work; waits up to timeout_s for running requests, then cancels the rest.
  void drain(double timeout_s);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace invar
