// Replays a trace through a policy and predicts, per run, whether its numbers can differ from
// the first run of the same prompt. Assumes an engine that is batch-invariant and otherwise
// deterministic: the only thing that can change a token's numbers is the *shape of the
// computation* that produced it — which steps (start, end) computed the KV it attends to and
// the recurrent state it continues from. For vLLM's policies a step's shape matters (chunked
// kernels round differently); for `invar` it does not (rule N4), so only tokens matter.
//
// Not modelled: eviction (the cache is unbounded), decode steps (generated tokens never form a
// later prompt's prefix in a trace), and batching with other requests (requests run one after
// another, as in the write-up's arms).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/policy.h"
#include "sim/trace.h"

namespace invar::sim {

struct StepSpan {
  int64_t start = 0, end = 0;  // prompt tokens [start, end)
};

struct RunResult {
  std::string request;
  int64_t run = 0;  // 1-based, per request name
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  std::vector<StepSpan> steps;          // computed prefill steps
  std::vector<int64_t> states_written;  // boundaries where this run stored a state
  std::string signature;                // hex SHA-256 of the per-token origins
  bool diverges = false;                // signature differs from run 1 of the same request
  // Where the prefix came from (for the table): "cold", or the writers of the KV and the state.
  std::string hit_origin;
};

struct SimResult {
  std::vector<RunResult> runs;
};

SimResult simulate(const Trace& trace, const Policy& policy);

struct SweepPoint {
  int64_t length = 0;     // the swept request's total prompt length
  bool diverges = false;  // any later run of any other request diverges from its first
};
// Varies the tail of every request named `name` so its prompt is LO..HI tokens.
std::vector<SweepPoint> simulate_sweep(const Trace& trace, const Policy& policy,
                                       const std::string& name, int64_t lo, int64_t hi);

}  // namespace invar::sim
