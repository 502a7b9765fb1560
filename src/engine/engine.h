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
#include "engine/engine_metrics.h"
#include "engine/request.h"
#include "engine/request_check.h"
#include "model/model.h"

namespace invar {

class Tokenizer;  // tokenizer/tokenizer.h

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
  const RequestLimits& limits() const;      // what submit() checks requests against
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
