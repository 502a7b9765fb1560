// GET /metrics also speaks vLLM's names, so that dashboards and alerts built for vLLM work
// unchanged: the core families of vllm/v1/metrics/loggers.py with its types, its label
// model_name (the served name) and engine="0", and its histogram buckets. Each is the same
// quantity as one of invar's own families (docs/api.md, "Metrics"); nothing is counted twice.
#pragma once

#include <string>
#include <vector>

#include "engine/engine.h"

namespace invar::server {

struct ServerMetrics;

// vLLM's bucket bounds (seconds) of vllm:time_to_first_token_seconds,
// vllm:inter_token_latency_seconds (= vllm:time_per_output_token_seconds) and
// vllm:e2e_request_latency_seconds.
const std::vector<double>& vllm_ttft_bounds();
const std::vector<double>& vllm_itl_bounds();
const std::vector<double>& vllm_e2e_bounds();

// The vllm: families in Prometheus text format 0.0.4.
std::string vllm_metrics_exposition(const EngineMetrics& e, const ServerMetrics& m,
                                    const std::string& model_name);

}  // namespace invar::server
