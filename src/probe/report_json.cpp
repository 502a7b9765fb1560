#include "probe/report.h"

namespace invar::probe {

json report_json(const Report& r) {
  json arms = json::array();
  for (const auto& a : r.arms) {
    json cached = json::array();
    for (const auto& c : a.cached_tokens) cached.push_back(c ? json(*c) : json());
    arms.push_back(
        {{"name", a.name},
         {"runs", a.runs},
         {"distinct",
          {{"order", a.distinct_order}, {"sorted", a.distinct_sorted}, {"text", a.distinct_text}}},
         {"first_divergent_token", a.first_divergent ? json(*a.first_divergent) : json()},
         {"max_abs_dlogprob", a.max_abs_dlogprob},
         {"candidate_set_changes", a.candidate_set_changes},
         {"cached_tokens", std::move(cached)},
         {"fingerprints", a.fingerprints}});
  }
  return {{"target", r.target}, {"arms", std::move(arms)}, {"verdict", r.verdict}};
}

int report_exit_code(const Report& r) {
  return r.verdict == "stable" ? 0 : 3;
}

namespace {

std::string one(const std::optional<int64_t>& x) {
  return x ? std::to_string(*x) : "n/a";
}

}  // namespace

std::string cached_tokens_compact(const std::vector<std::optional<int64_t>>& v) {
  // A repeating cycle (threshold cells: cold run, then hits) prints once: "(0, 2348)×9".
  for (size_t p = 2; p <= 4 && 2 * p <= v.size(); p++) {
    if (v.size() % p != 0) continue;
    bool periodic = true;
    for (size_t i = p; i < v.size() && periodic; i++) periodic = v[i] == v[i - p];
    bool constant = true;
    for (size_t i = 1; i < p; i++) constant = constant && v[i] == v[0];
    if (!periodic || constant) continue;
    std::string s = "(";
    for (size_t i = 0; i < p; i++) s += (i ? ", " : "") + one(v[i]);
    return s + ")\u00d7" + std::to_string(v.size() / p);
  }
  std::string s;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j < v.size() && v[j] == v[i]) j++;
    if (!s.empty()) s += ", ";
    s += one(v[i]);
    if (j - i > 1) s += "\u00d7" + std::to_string(j - i);
    i = j;
  }
  return s.empty() ? "-" : s;
}

}  // namespace invar::probe
