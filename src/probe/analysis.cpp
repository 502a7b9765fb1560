#include "probe/analysis.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

namespace invar::probe {
namespace {

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

bool same_candidate(const Candidate& a, const Candidate& b) {
  return a.id == b.id && a.token == b.token && same_bits(a.logprob, b.logprob);
}

bool same_record(const TokenRecord& a, const TokenRecord& b) {
  if (!same_candidate(a.chosen, b.chosen) || a.top.size() != b.top.size()) return false;
  for (size_t i = 0; i < a.top.size(); i++)
    if (!same_candidate(a.top[i], b.top[i])) return false;
  return true;
}

template <class T>
void add_distinct(std::vector<T>& v, const T& x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

}  // namespace

RunComparison runs_compare(const Completion& ref, const Completion& run) {
  RunComparison c;
  const size_t n = std::min(ref.tokens.size(), run.tokens.size());
  for (size_t i = 0; i < n; i++) {
    const TokenRecord& a = ref.tokens[i];
    const TokenRecord& b = run.tokens[i];
    if (!c.first_divergent && !same_record(a, b)) c.first_divergent = int64_t(i);
    std::map<std::string, double> la;
    la[candidate_key(a.chosen)] = a.chosen.logprob;
    for (const auto& k : a.top) la[candidate_key(k)] = k.logprob;
    std::map<std::string, double> lb;
    lb[candidate_key(b.chosen)] = b.chosen.logprob;
    for (const auto& k : b.top) lb[candidate_key(k)] = k.logprob;
    double d = 0;
    for (const auto& [key, v] : la) {
      auto it = lb.find(key);
      if (it != lb.end()) d = std::max(d, std::fabs(v - it->second));
    }
    c.dlogprob.push_back(d);
    c.max_abs_dlogprob = std::max(c.max_abs_dlogprob, d);
    std::set<std::string> sa, sb;
    for (const auto& k : a.top) sa.insert(candidate_key(k));
    for (const auto& k : b.top) sb.insert(candidate_key(k));
    if (sa != sb) c.candidate_set_changes++;
    if (candidate_key(a.chosen) != candidate_key(b.chosen)) break;  // continuations differ now
  }
  // One stopped where the other went on (both agreed up to there).
  if (!c.first_divergent && ref.tokens.size() != run.tokens.size()) c.first_divergent = int64_t(n);
  return c;
}

ArmSummary arm_summarize(const Arm& arm, const std::vector<RunRecord>& measured) {
  ArmSummary s;
  s.name = arm.name;
  s.kind = arm_kind_name(arm.kind);
  s.task = arm.task;
  s.runs = int64_t(measured.size());
  std::vector<std::string> sorted, text;
  for (const auto& r : measured) {
    add_distinct(s.order_digests, r.digests.order);
    add_distinct(sorted, r.digests.sorted);
    add_distinct(text, r.digests.text);
    s.cached_tokens.push_back(r.completion.usage.cached_tokens);
    add_distinct(s.fingerprints, r.completion.system_fingerprint);
  }
  s.distinct_order = int64_t(s.order_digests.size());
  s.distinct_sorted = int64_t(sorted.size());
  s.distinct_text = int64_t(text.size());
  s.texts_differ = s.distinct_text > 1;
  if (measured.empty()) return s;
  const Completion& ref = measured.front().completion;
  for (size_t i = 1; i < measured.size(); i++) {
    RunComparison c = runs_compare(ref, measured[i].completion);
    if (c.first_divergent && (!s.first_divergent || *c.first_divergent < *s.first_divergent))
      s.first_divergent = c.first_divergent;
    s.max_abs_dlogprob = std::max(s.max_abs_dlogprob, c.max_abs_dlogprob);
    s.candidate_set_changes += c.candidate_set_changes;
    if (s.dlogprob_by_position.size() < c.dlogprob.size())
      s.dlogprob_by_position.resize(c.dlogprob.size(), 0.0);
    for (size_t p = 0; p < c.dlogprob.size(); p++)
      s.dlogprob_by_position[p] = std::max(s.dlogprob_by_position[p], c.dlogprob[p]);
  }
  if (s.dlogprob_by_position.empty()) s.dlogprob_by_position.assign(ref.tokens.size(), 0.0);
  if (arm.kind == ArmKind::threshold) {
    const std::vector<int> fillers = threshold_fillers(arm);
    const std::string& ref_digest = measured.front().digests.order;
    for (const auto& r : measured) {
      if (r.cell < 0) continue;
      if (s.cells.size() <= size_t(r.cell)) s.cells.resize(size_t(r.cell) + 1);
      ThresholdCell& c = s.cells[size_t(r.cell)];
      c.delta = fillers.at(size_t(r.cell)) - arm.span;
      c.order.push_back(r.digests.order);
      c.cached_tokens.push_back(r.completion.usage.cached_tokens);
      if (r.digests.order != ref_digest) c.flipped = true;
    }
  }
  return s;
}

void report_finish(Report& r) {
  // Arms that measure the same task are expected to give one and the same digest.
  std::map<std::string, std::vector<const ArmSummary*>> by_task;
  for (const auto& a : r.arms) by_task[a.task].push_back(&a);
  bool diverged = false;
  for (const auto& a : r.arms)
    if (a.distinct_order > 1) diverged = true;
  r.disagreeing_groups.clear();
  for (const auto& [task, arms] : by_task) {
    // Agreement: every arm saw the same set of order digests (one each, when stable).
    bool agree = true;
    const std::set<std::string> first(arms[0]->order_digests.begin(), arms[0]->order_digests.end());
    for (const auto* a : arms)
      if (std::set<std::string>(a->order_digests.begin(), a->order_digests.end()) != first)
        agree = false;
    if (!agree) {
      std::vector<std::string> names;
      for (const auto* a : arms) names.push_back(a->name);
      r.disagreeing_groups.push_back(std::move(names));
      diverged = true;
    }
  }
  r.verdict = diverged ? "diverged" : "stable";
}

}  // namespace invar::probe
