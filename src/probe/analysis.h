// From raw runs to the per-arm report: distinct digests, first divergent token, largest logprob
// change of shared candidates, candidate-set changes, and the overall verdict.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "probe/completion.h"
#include "probe/digest.h"
#include "probe/plan.h"

namespace invar::probe {

// One completion the probe asked for.
struct RunRecord {
  std::string arm;
  std::string role;  // "measure" (counted in the arm) or "warm" (task A, run first)
  std::string task;
  int cell = -1;         // threshold: index of the cell; -1 otherwise
  int tail_fillers = 0;  // fillers appended to the task's tail
  int run = 0;           // 0-based within the arm (measure) or the cell
  std::string cache_salt;
  double seconds = 0;  // request wall time
  Completion completion;
  Digests digests;
};

// `run` compared to `ref`, position by position, up to and including the first position whose
// chosen token differs (after it the two continuations are different sequences).
struct RunComparison {
  std::optional<int64_t> first_divergent;  // first position whose record (chosen token or any
                                           // candidate, key or logprob bits, order) differs
  double max_abs_dlogprob = 0;             // over candidates present at a position in both
  int64_t candidate_set_changes = 0;       // positions whose candidate key sets differ
  std::vector<double> dlogprob;            // [compared positions] max |Δ| at each position
};
RunComparison runs_compare(const Completion& ref, const Completion& run);

struct ThresholdCell {
  int delta = 0;                   // A's tail relative to the middle cell, in fillers
  std::vector<std::string> order;  // order digest of each measured run in the cell
  std::vector<std::optional<int64_t>> cached_tokens;
  bool flipped = false;  // a run differs from the arm's reference digest
};

struct ArmSummary {
  std::string name;
  std::string kind;
  std::string task;
  int64_t runs = 0;
  int64_t distinct_order = 0, distinct_sorted = 0, distinct_text = 0;
  std::optional<int64_t> first_divergent;  // smallest over runs vs the arm's first run
  double max_abs_dlogprob = 0;
  int64_t candidate_set_changes = 0;
  bool texts_differ = false;
  std::vector<std::optional<int64_t>> cached_tokens;  // [runs]
  std::vector<std::string> fingerprints;              // distinct, first-seen order
  std::vector<std::string> order_digests;             // distinct, first-seen order
  std::vector<double> dlogprob_by_position;           // max over runs, vs the first run
  std::vector<ThresholdCell> cells;                   // threshold arms only
};

struct Report {
  std::string target;
  std::string api;
  std::string model;
  int max_tokens = 0, top_k = 0;
  std::vector<ArmSummary> arms;
  // Arms measuring the same task (clean / contaminated / no-cache / threshold) must give the
  // same digest; each group's arm names when they do not.
  std::vector<std::vector<std::string>> disagreeing_groups;
  std::string verdict;  // "stable" | "diverged"
};

// `measured` holds the arm's "measure" records in order.
ArmSummary arm_summarize(const Arm& arm, const std::vector<RunRecord>& measured);
// Fills disagreeing_groups and verdict from the arms.
void report_finish(Report& r);

}  // namespace invar::probe
