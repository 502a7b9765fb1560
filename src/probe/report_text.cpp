#include <algorithm>
#include <cstdio>

#include "probe/report.h"

namespace invar::probe {
namespace {

std::string fmt_double(double v) {
  char buf[32];
  if (v == 0) return "0";
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string pad(const std::string& s, size_t w, bool right = false) {
  // Width in code points, so "×" does not shift the columns.
  size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xc0) != 0x80) n++;
  if (n >= w) return s;
  return right ? std::string(w - n, ' ') + s : s + std::string(w - n, ' ');
}

}  // namespace

std::string report_text(const Report& r) {
  std::string s = "invar probe: " + r.target + "\n  api " + r.api +
                  (r.model.empty() ? "" : ", model " + r.model) + ", " +
                  std::to_string(r.max_tokens) + " tokens, top-" + std::to_string(r.top_k) + "\n\n";
  s += pad("arm", 14) + pad("runs", 6, true) + pad("order", 7, true) + pad("sorted", 8, true) +
       pad("text", 6, true) + pad("first div", 11, true) + pad("max|dlogp|", 12, true) +
       pad("cand-set", 10, true) + pad("texts", 8, true) + "  cached_tokens\n";
  for (const auto& a : r.arms) {
    s += pad(a.name, 14) + pad(std::to_string(a.runs), 6, true) +
         pad(std::to_string(a.distinct_order), 7, true) +
         pad(std::to_string(a.distinct_sorted), 8, true) +
         pad(std::to_string(a.distinct_text), 6, true) +
         pad(a.first_divergent ? std::to_string(*a.first_divergent) : "-", 11, true) +
         pad(fmt_double(a.max_abs_dlogprob), 12, true) +
         pad(std::to_string(a.candidate_set_changes), 10, true) +
         pad(a.texts_differ ? "differ" : "same", 8, true) + "  " +
         cached_tokens_compact(a.cached_tokens) + "\n";
  }
  for (const auto& a : r.arms) {
    if (a.cells.empty()) continue;
    std::string flips;
    for (const auto& c : a.cells)
      if (c.flipped)
        flips += (flips.empty() ? "" : ", ") + std::string(c.delta > 0 ? "+" : "") +
                 std::to_string(c.delta);
    s += "\n" + a.name + ": " + std::to_string(a.cells.size()) + " cells, A's tail " +
         std::to_string(a.cells.front().delta) + ".." + (a.cells.back().delta > 0 ? "+" : "") +
         std::to_string(a.cells.back().delta) + " tokens; " +
         (flips.empty() ? "no cell flips B" : "B flips at " + flips) + "\n";
  }
  std::vector<std::string> fps;
  for (const auto& a : r.arms)
    for (const auto& f : a.fingerprints)
      if (std::find(fps.begin(), fps.end(), f) == fps.end()) fps.push_back(f);
  s += "\nsystem_fingerprint:";
  for (const auto& f : fps) s += " " + (f.empty() ? std::string("(none)") : f);
  s += "\n";
  if (r.disagreeing_groups.empty()) {
    s += "across arms: every arm measuring the same task saw the same digests\n";
  } else {
    for (const auto& g : r.disagreeing_groups) {
      std::string names;
      for (const auto& n : g) names += (names.empty() ? "" : " / ") + n;
      s += "across arms: " + names + " disagree\n";
    }
  }
  s += "verdict: " + r.verdict + "\n";
  return s;
}

}  // namespace invar::probe
