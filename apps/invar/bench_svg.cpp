#include "bench_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace invar::app {
namespace {

constexpr double kPanelW = 420, kPanelH = 320;  // one panel, axes and labels inside
constexpr double kLeft = 64, kRight = 16, kTop = 40, kBottom = 48;  // plot area margins
const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"};

std::string escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

std::string svg_num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

// The axis' top: 1, 2 or 5 times a power of ten at or above `max` (1 for no data).
double axis_top(double max) {
  if (!(max > 0)) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(max)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= max) return m * p;
  return 10 * p;
}

std::string tick_label(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

std::string panel_svg(const SvgPanel& p, double ox) {
  double x_max = 0, y_max = 0;
  for (const auto& s : p.series) {
    for (double x : s.x) x_max = std::max(x_max, x);
    for (double y : s.y) y_max = std::max(y_max, y);
  }
  x_max = axis_top(x_max);
  y_max = axis_top(y_max);
  const double x0 = ox + kLeft, x1 = ox + kPanelW - kRight, y0 = kTop + kPanelH - kBottom,
               y1 = kTop + kTop;
  const auto px = [&](double x) { return x0 + (x1 - x0) * x / x_max; };
  const auto py = [&](double y) { return y0 - (y0 - y1) * y / y_max; };
  std::string out = "<text x=\"" + svg_num((x0 + x1) / 2) + "\" y=\"" + svg_num(kTop + 24) +
                    "\" text-anchor=\"middle\" font-weight=\"bold\">" + escaped(p.title) +
                    "</text>\n";
  out += "<polyline fill=\"none\" stroke=\"black\" points=\"" + svg_num(x0) + "," + svg_num(y1) +
         " " + svg_num(x0) + "," + svg_num(y0) + " " + svg_num(x1) + "," + svg_num(y0) + "\"/>\n";
  for (int k = 0; k <= 4; ++k) {
    const double xv = x_max * k / 4, yv = y_max * k / 4;
    out += "<line x1=\"" + svg_num(px(xv)) + "\" y1=\"" + svg_num(y0) + "\" x2=\"" +
           svg_num(px(xv)) + "\" y2=\"" + svg_num(y0 + 4) + "\" stroke=\"black\"/>\n";
    out += "<text x=\"" + svg_num(px(xv)) + "\" y=\"" + svg_num(y0 + 16) +
           "\" text-anchor=\"middle\" font-size=\"11\">" + tick_label(xv) + "</text>\n";
    out += "<line x1=\"" + svg_num(x0 - 4) + "\" y1=\"" + svg_num(py(yv)) + "\" x2=\"" +
           svg_num(x1) + "\" y2=\"" + svg_num(py(yv)) + "\" stroke=\"#ddd\"/>\n";
    out += "<text x=\"" + svg_num(x0 - 6) + "\" y=\"" + svg_num(py(yv) + 4) +
           "\" text-anchor=\"end\" font-size=\"11\">" + tick_label(yv) + "</text>\n";
  }
  out += "<text x=\"" + svg_num((x0 + x1) / 2) + "\" y=\"" + svg_num(y0 + 36) +
         "\" text-anchor=\"middle\" font-size=\"12\">" + escaped(p.x_label) + "</text>\n";
  out += "<text transform=\"translate(" + svg_num(ox + 16) + "," + svg_num((y0 + y1) / 2) +
         ") rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">" + escaped(p.y_label) +
         "</text>\n";
  for (size_t i = 0; i < p.series.size(); ++i) {
    const SvgSeries& s = p.series[i];
    const char* colour = kColours[i % 5];
    std::string points;
    for (size_t k = 0; k < s.x.size() && k < s.y.size(); ++k) {
      points += (points.empty() ? "" : " ") + svg_num(px(s.x[k])) + "," + svg_num(py(s.y[k]));
      out += "<circle cx=\"" + svg_num(px(s.x[k])) + "\" cy=\"" + svg_num(py(s.y[k])) +
             "\" r=\"3\" fill=\"" + colour + "\"/>\n";
    }
    out += "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"" + std::string(colour) +
           "\" points=\"" + points + "\"/>\n";
    const double ly = y1 + 16 * double(i);
    out += "<line x1=\"" + svg_num(x0 + 10) + "\" y1=\"" + svg_num(ly) + "\" x2=\"" +
           svg_num(x0 + 30) + "\" y2=\"" + svg_num(ly) + "\" stroke-width=\"2\" stroke=\"" +
           colour + "\"/>\n";
    out += "<text x=\"" + svg_num(x0 + 36) + "\" y=\"" + svg_num(ly + 4) + "\" font-size=\"12\">" +
           escaped(s.name) + "</text>\n";
  }
  return out;
}

}  // namespace

std::string svg_line_charts(const std::string& title, const std::vector<SvgPanel>& panels) {
  const double w = kPanelW * double(std::max<size_t>(1, panels.size())), h = kTop + kPanelH;
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + svg_num(w) +
                    "\" height=\"" + svg_num(h) + "\" viewBox=\"0 0 " + svg_num(w) + " " +
                    svg_num(h) +
                    "\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" "
                    "fill=\"white\"/>\n<text x=\"" +
                    svg_num(w / 2) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">" +
                    escaped(title) + "</text>\n";
  for (size_t i = 0; i < panels.size(); ++i) out += panel_svg(panels[i], kPanelW * double(i));
  return out + "</svg>\n";
}

}  // namespace invar::app
