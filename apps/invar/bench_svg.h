// Line charts as SVG text, for the benches' --plot: panels side by side, each with axes from 0,
// ticks, and one polyline (with point marks) per series. No dependency; the file opens in a
// browser.
#pragma once

#include <string>
#include <vector>

namespace invar::app {

struct SvgSeries {
  std::string name;       // in the legend
  std::vector<double> x;  // same length as y
  std::vector<double> y;
};

struct SvgPanel {
  std::string title, x_label, y_label;
  std::vector<SvgSeries> series;
};

// One SVG document: `panels` left to right under `title`. A series' colour is its index's, the
// same in every panel.
std::string svg_line_charts(const std::string& title, const std::vector<SvgPanel>& panels);

}  // namespace invar::app
