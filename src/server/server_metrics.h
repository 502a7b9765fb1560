// The server's own counters and latency histograms, and the Prometheus text exposition of them
// together with the engine's metrics (GET /metrics).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "grammar/compile.h"
#include "server/backend.h"
#include "server/client_limits.h"
#include "server/vllm_metrics.h"

namespace invar::server {

// A Prometheus histogram (seconds) counted at the union of invar's buckets (kBounds) and
// `other` layouts, so that it is exposed exactly in each: invar's own and vLLM's
// (vllm_metrics.h) come from the same observations.
class LatencyHistogram {
 public:
  static constexpr std::array<double, 14> kBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                     0.25,  0.5,    1,     2.5,  5,     10,   30};
  explicit LatencyHistogram(const std::vector<double>& other = {});
  void observe(double seconds);
  // In invar's buckets, bounds written as %g (0.0025, 1).
  std::string exposition(const std::string& name, const std::string& help) const;
  // In `bounds` (a layout given at construction, or kBounds), each sample carrying `labels`
  // ('k="v",...'; may be empty) and its bound written as Go and Python clients write it (1.0).
  std::string exposition(const std::string& name, const std::string& help,
                         const std::vector<double>& bounds, const std::string& labels) const;

 private:
  std::vector<double> bounds_;  // ascending, distinct
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bound, last: +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

struct ServerMetrics {
  std::atomic<int64_t> inflight{0};                // admitted requests not yet answered
  ClientSlots inflight_by_client;                  // of them, per client (--client-queue-limit)
  std::atomic<uint64_t> client_queue_refusals{0};  // 429: a client at its request cap
  std::atomic<uint64_t> client_connection_refusals{0};  // 429: an address at its connection
                                                        // cap (copied from the transport)
  std::atomic<uint64_t> cancelled_total{0};             // cancelled by a client disconnect
  std::atomic<uint64_t> completion_tokens_total{0};
  std::atomic<uint64_t> responses_total{0};              // every response, of every status
  LatencyHistogram ttft{vllm_ttft_bounds()};             // submit → first generated token
  LatencyHistogram inter_token{vllm_itl_bounds()};       // between consecutive generated tokens
  LatencyHistogram request_duration{vllm_e2e_bounds()};  // admission → last byte produced

  void count_response(const std::string& endpoint, int status);
  // Prometheus text format 0.0.4. engine: null while the model loads.
  std::string exposition(const EngineMetrics* engine, const std::string& state) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> responses_;  // (endpoint, status) → count
};

// The vision tower's counters (invar serve --mmproj): images encoded, taken from the encoder
// cache, encode seconds, cache bytes.
std::string image_metrics_exposition(const ImageStats& s);

// The grammar compile cache (grammar::compile_cached): compilations, hits, bytes held against
// its budget (--grammar-cache-bytes), evictions, compilations running now.
std::string grammar_metrics_exposition(const grammar::CacheStats& s, size_t budget);

}  // namespace invar::server
