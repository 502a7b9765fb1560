// The probe's three outputs of one Report: the --json object, the terminal table, the HTML page.
#pragma once

#include <string>

#include "probe/analysis.h"

namespace invar::probe {

// Exactly: {"target", "arms": [{"name", "runs", "distinct": {"order", "sorted", "text"},
// "first_divergent_token", "max_abs_dlogprob", "candidate_set_changes", "cached_tokens",
// "fingerprints"}], "verdict"}. cached_tokens holds null for a run whose server reported none.
json report_json(const Report& r);

// Table, one row per arm, then the cross-arm line and the verdict.
std::string report_text(const Report& r);

// A self-contained page: the table and an inline SVG chart of |Δlogprob| per token position per
// arm (log scale). No script, no network.
std::string report_html(const Report& r);

// Exit status: 0 stable, 3 diverged (2 is for errors, decided by the caller).
int report_exit_code(const Report& r);

// "0, 3040×9": equal neighbours folded.
std::string cached_tokens_compact(const std::vector<std::optional<int64_t>>& v);

}  // namespace invar::probe
