#include <algorithm>
#include <cmath>
#include <cstdio>

#include "probe/report.h"

namespace invar::probe {
namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string num(double v, const char* f = "%.1f") {
  char buf[40];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Colours of the arms, in order (the chart's lines and the table's swatches).
const char* const kArmColours[] = {"#d62728", "#1f77b4", "#2ca02c",
                                   "#9467bd", "#ff7f0e", "#8c564b"};

// log10 axis from 1e-9 (where exact zeros sit) to 1e1.
constexpr double kLogMin = -9, kLogMax = 1;

double y_of(double v, double top, double h) {
  double l = v > 0 ? std::log10(v) : kLogMin;
  l = std::clamp(l, kLogMin, kLogMax);
  return top + h * (kLogMax - l) / (kLogMax - kLogMin);
}

std::string chart_svg(const Report& r) {
  const double W = 900, H = 300, left = 70, right = 170, top = 20, bottom = 50;
  const double pw = W - left - right, ph = H - top - bottom;
  size_t n = 1;
  for (const auto& a : r.arms) n = std::max(n, a.dlogprob_by_position.size());
  auto x_of = [&](size_t i) { return left + (n <= 1 ? 0.0 : pw * double(i) / double(n - 1)); };
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"chart\" width=\"" +
                  num(W, "%.0f") + "\" height=\"" + num(H, "%.0f") +
                  "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(pw) + "\" height=\"" +
       num(ph) + "\" fill=\"#fafafa\" stroke=\"#333\"/>\n";
  for (int e = int(kLogMin); e <= int(kLogMax); e++) {
    const double y = y_of(std::pow(10.0, e), top, ph);
    s += "<line x1=\"" + num(left) + "\" x2=\"" + num(left + pw) + "\" y1=\"" + num(y) +
         "\" y2=\"" + num(y) + "\" stroke=\"#ddd\"/>";
    const std::string label = e == int(kLogMin) ? "\u22641e-9" : "1e" + std::to_string(e);
    s += "<text x=\"" + num(left - 6) + "\" y=\"" + num(y + 4) + "\" text-anchor=\"end\">" + label +
         "</text>\n";
  }
  const size_t tick = std::max<size_t>(1, n / 16);
  for (size_t i = 0; i < n; i += tick)
    s += "<text x=\"" + num(x_of(i)) + "\" y=\"" + num(top + ph + 16) +
         "\" text-anchor=\"middle\">" + std::to_string(i) + "</text>";
  s += "\n<text x=\"" + num(left + pw / 2) + "\" y=\"" + num(H - 10) +
       "\" text-anchor=\"middle\">generated token position</text>\n";
  s += "<text transform=\"translate(16," + num(top + ph / 2) +
       ") rotate(-90)\" text-anchor=\"middle\">max |\u0394logprob| vs run 1</text>\n";
  for (size_t ai = 0; ai < r.arms.size(); ai++) {
    const auto& a = r.arms[ai];
    const std::string col = kArmColours[ai % std::size(kArmColours)];
    // Stable arms all lie on the floor; a small vertical offset keeps each line visible.
    const double off = double(ai) * 3.0;
    std::string pts;
    for (size_t i = 0; i < a.dlogprob_by_position.size(); i++)
      pts += num(x_of(i)) + "," + num(y_of(a.dlogprob_by_position[i], top, ph) - off) + " ";
    s += "<polyline fill=\"none\" stroke=\"" + col + "\" stroke-width=\"2.5\" points=\"" + pts +
         "\"/>\n";
    for (size_t i = 0; i < a.dlogprob_by_position.size(); i++)
      s += "<circle cx=\"" + num(x_of(i)) + "\" cy=\"" +
           num(y_of(a.dlogprob_by_position[i], top, ph) - off) + "\" r=\"3.5\" fill=\"" + col +
           "\"/>";
    const double ly = top + 10 + 22 * double(ai);
    s += "\n<rect x=\"" + num(left + pw + 16) + "\" y=\"" + num(ly) +
         "\" width=\"18\" height=\"12\" fill=\"" + col + "\"/><text x=\"" + num(left + pw + 40) +
         "\" y=\"" + num(ly + 11) + "\">" + esc(a.name) + "</text>\n";
  }
  s += "</svg>\n";
  return s;
}

}  // namespace

std::string report_html(const Report& r) {
  std::string s =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>invar probe report</title>\n"
      "<style>body{font-family:sans-serif;margin:20px;color:#111;background:#fff}h1{margin:0 0 8px}"
      "td:first-child{white-space:nowrap}"
      "table{border-collapse:collapse;margin:12px 0}td,th{border:1px solid #999;padding:4px 8px;"
      "text-align:right}td:first-child,th:first-child{text-align:left}"
      ".stable{color:#1a7f37;font-weight:bold}.diverged{color:#c00;font-weight:bold}"
      ".sw{display:inline-block;width:12px;height:12px;margin-right:6px}"
      "code{font-size:90%}</style></head><body>\n";
  s += "<h1>invar probe</h1>\n<p>target <code>" + esc(r.target) + "</code>, api " + esc(r.api) +
       (r.model.empty() ? "" : ", model <code>" + esc(r.model) + "</code>") + ", " +
       std::to_string(r.max_tokens) + " tokens, top-" + std::to_string(r.top_k) + "</p>\n";
  s +=
      "<p>verdict: <span id=\"verdict\" class=\"" + r.verdict + "\">" + r.verdict + "</span></p>\n";
  s += "<table id=\"arms\"><tr><th>arm</th><th>runs</th><th>order digests</th><th>sorted "
       "digests</th>"
       "<th>text digests</th><th>first divergent token</th><th>max |&Delta;logprob|</th>"
       "<th>candidate-set changes</th><th>texts</th><th>cached_tokens per "
       "run</th><th>system_fingerprint</th></tr>\n";
  for (size_t ai = 0; ai < r.arms.size(); ai++) {
    const auto& a = r.arms[ai];
    std::string fps;
    for (const auto& f : a.fingerprints)
      fps += (fps.empty() ? "" : ", ") + esc(f.empty() ? "(none)" : f);
    s += "<tr><td><span class=\"sw\" style=\"background:" +
         std::string(kArmColours[ai % std::size(kArmColours)]) + "\"></span>" + esc(a.name) +
         "</td><td>" + std::to_string(a.runs) + "</td><td>" + std::to_string(a.distinct_order) +
         "</td><td>" + std::to_string(a.distinct_sorted) + "</td><td>" +
         std::to_string(a.distinct_text) + "</td><td>" +
         (a.first_divergent ? std::to_string(*a.first_divergent) : "&ndash;") + "</td><td>" +
         num(a.max_abs_dlogprob, "%.3g") + "</td><td>" + std::to_string(a.candidate_set_changes) +
         "</td><td>" + (a.texts_differ ? "differ" : "same") + "</td><td>" +
         esc(cached_tokens_compact(a.cached_tokens)) + "</td><td><code>" + fps +
         "</code></td></tr>\n";
  }
  s += "</table>\n";
  for (const auto& g : r.disagreeing_groups) {
    std::string names;
    for (const auto& n : g) names += (names.empty() ? "" : " / ") + n;
    s += "<p class=\"diverged\">across arms: " + esc(names) + " disagree</p>\n";
  }
  for (const auto& a : r.arms) {
    if (a.cells.empty()) continue;
    s += "<p>" + esc(a.name) + " cells (A's tail in tokens): ";
    for (const auto& c : a.cells)
      s += std::string(c.flipped ? "<b class=\"diverged\">" : "<span>") + (c.delta > 0 ? "+" : "") +
           std::to_string(c.delta) + (c.flipped ? " flips</b> " : "</span> ");
    s += "</p>\n";
  }
  s += "<h2>|&Delta;logprob| of shared candidates per token position</h2>\n" + chart_svg(r);
  s += "<p>Each run is compared with its arm's first run, position by position up to the first "
       "changed chosen token; exact zeros are drawn at the floor.</p>\n</body></html>\n";
  return s;
}

}  // namespace invar::probe
