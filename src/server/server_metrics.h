// The server's own counters and latency histograms, and the Prometheus text exposition of them
// together with the engine's metrics (GET /metrics).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "engine/engine.h"

namespace invar::server {

// A Prometheus histogram with fixed buckets (seconds).
class LatencyHistogram {
 public:
  static constexpr std::array<double, 14> kBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                     0.25,  0.5,    1,     2.5,  5,     10,   30};
  void observe(double seconds);
  std::string exposition(const std::string& name, const std::string& help) const;

 private:
  mutable std::mutex mu_;
  std::array<uint64_t, kBounds.size() + 1> counts_{};  // last: +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

struct ServerMetrics {
  std::atomic<int64_t> inflight{0};          // admitted requests not yet answered
  std::atomic<uint64_t> cancelled_total{0};  // cancelled by a client disconnect
  std::atomic<uint64_t> completion_tokens_total{0};
  std::atomic<uint64_t> responses_total{0};  // every response, of every status
  LatencyHistogram ttft;                     // submit → first generated token
  LatencyHistogram inter_token;              // between consecutive generated tokens
  LatencyHistogram request_duration;         // admission → last byte produced

  void count_response(const std::string& endpoint, int status);
  // Prometheus text format 0.0.4. engine: null while the model loads.
  std::string exposition(const EngineMetrics* engine, const std::string& state) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> responses_;  // (endpoint, status) → count
};

}  // namespace invar::server
