#include "server/vllm_metrics.h"

#include <cstdio>

#include "server/server_metrics.h"

namespace invar::server {
namespace {

// A label value as the text format quotes it.
std::string label_escaped(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// One sample family. A counter named N is exposed as N_total, as vLLM's client
// (prometheus_client) writes it in text format 0.0.4: HELP, TYPE and sample all say N_total.
void family(std::string& out, const std::string& name, const char* type, const char* help,
            const std::string& labels, double v) {
  const std::string n = std::string(type) == "counter" ? name + "_total" : name;
  char num[64];
  std::snprintf(num, sizeof num, "%.17g", v);
  out += "# HELP " + n + " " + help + "\n# TYPE " + n + " " + type + "\n" + n + "{" + labels +
         "} " + num + "\n";
}

}  // namespace

const std::vector<double>& vllm_ttft_bounds() {
  static const std::vector<double> b = {0.001, 0.005, 0.01, 0.02, 0.04,  0.06,  0.08, 0.1,
                                        0.25,  0.5,   0.75, 1.0,  2.5,   5.0,   7.5,  10.0,
                                        20.0,  40.0,  80.0, 160., 640.0, 2560.0};
  return b;
}

const std::vector<double>& vllm_itl_bounds() {
  static const std::vector<double> b = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                        0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
  return b;
}

const std::vector<double>& vllm_e2e_bounds() {
  static const std::vector<double> b = {0.3,  0.5,  0.8,  1.0,   1.5,   2.0,   2.5,
                                        5.0,  10.0, 15.0, 20.0,  30.0,  40.0,  50.0,
                                        60.0, 120., 240., 480.0, 960.0, 1920., 7680.0};
  return b;
}

std::string vllm_metrics_exposition(const EngineMetrics& e, const ServerMetrics& m,
                                    const std::string& model_name) {
  const std::string labels = "model_name=\"" + label_escaped(model_name) + "\",engine=\"0\"";
  std::string out;
  family(out, "vllm:num_requests_running", "gauge",
         "Number of requests in model execution batches.", labels, double(e.requests_running));
  family(out, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
         labels, double(e.requests_waiting));
  family(out, "vllm:prompt_tokens", "counter", "Number of prefill tokens processed.", labels,
         double(e.prompt_tokens_total));
  family(out, "vllm:generation_tokens", "counter", "Number of generation tokens processed.", labels,
         double(e.generated_tokens_total));
  // In tokens, as vLLM counts them: every prompt token is looked up, the cached ones hit.
  family(out, "vllm:prefix_cache_queries", "counter",
         "Prefix cache queries, in terms of number of queried tokens.", labels,
         double(e.prompt_tokens_total));
  family(out, "vllm:prefix_cache_hits", "counter",
         "Prefix cache hits, in terms of number of cached tokens.", labels,
         double(e.cached_tokens_total));
  family(out, "vllm:num_preemptions", "counter", "Cumulative number of preemption from the engine.",
         labels, double(e.preemptions));
  out +=
      m.ttft.exposition("vllm:time_to_first_token_seconds",
                        "Histogram of time to first token in seconds.", vllm_ttft_bounds(), labels);
  out += m.inter_token.exposition("vllm:inter_token_latency_seconds",
                                  "Histogram of inter-token latency in seconds.", vllm_itl_bounds(),
                                  labels);
  // The name vLLM used for the same histogram before inter_token_latency (still exported).
  out += m.inter_token.exposition("vllm:time_per_output_token_seconds",
                                  "Histogram of time per output token in seconds.",
                                  vllm_itl_bounds(), labels);
  out += m.request_duration.exposition("vllm:e2e_request_latency_seconds",
                                       "Histogram of e2e request latency in seconds.",
                                       vllm_e2e_bounds(), labels);
  return out;
}

}  // namespace invar::server
