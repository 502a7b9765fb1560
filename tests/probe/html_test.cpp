// The HTML report opens in headless Chromium: its DOM has the table and the chart, and a
// screenshot of it is not blank: it shows the arms' chart colours and the table's text.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "png_decode.h"
#include "probe/plan.h"
#include "probe/report.h"

namespace invar::probe {
namespace html_test {

namespace fs = std::filesystem;
const char* const kChromium = "/usr/bin/chromium";

Report sample_report() {
  Report r;
  r.target = "http://127.0.0.1:8080";
  r.api = "chat";
  r.model = "tiny";
  r.max_tokens = 12;
  r.top_k = 20;
  ArmSummary clean;
  clean.name = "clean";
  clean.runs = 10;
  clean.distinct_order = clean.distinct_sorted = clean.distinct_text = 1;
  clean.cached_tokens = {0, 3040, 3040};
  clean.fingerprints = {"fp_1"};
  clean.dlogprob_by_position.assign(12, 0.0);
  ArmSummary cont = clean;
  cont.name = "contaminated";
  cont.distinct_order = cont.distinct_sorted = 2;
  cont.first_divergent = 0;
  cont.max_abs_dlogprob = 0.031;
  for (int i = 0; i < 12; i++) cont.dlogprob_by_position[size_t(i)] = 1e-3 * (i + 1);
  r.arms = {clean, cont};
  report_finish(r);
  return r;
}

std::string run(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  pclose(f);
  return out;
}

std::string chromium(const std::string& args, const fs::path& dir) {
  const fs::path profile = dir / ("profile-" + std::to_string(rand()));
  fs::create_directories(profile);
  return "timeout 90 " + std::string(kChromium) +
         " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
         " --disable-background-networking --disable-component-update --disable-sync"
         " --hide-scrollbars --user-data-dir=" +
         profile.string() + " " + args;
}

TEST(ProbeHtml, SelfContainedPage) {
  const std::string html = report_html(sample_report());
  EXPECT_NE(html.find("<table id=\"arms\""), std::string::npos);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("<polyline"), std::string::npos);
  // No network: no URL but the SVG namespace and the target named in the text.
  std::string rest = html;
  for (const std::string known : {"http://www.w3.org/2000/svg", "http://127.0.0.1:8080"})
    for (size_t p; (p = rest.find(known)) != std::string::npos;) rest.erase(p, known.size());
  EXPECT_EQ(rest.find("://"), std::string::npos);
  EXPECT_EQ(rest.find("url("), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
}

TEST(ProbeHtml, OpensInHeadlessChromium) {
  ASSERT_EQ(access(kChromium, X_OK), 0)
      << kChromium << " is absent (scripts/install-deps installs it)";
  const fs::path dir = fs::temp_directory_path() / ("probe-html-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path page = dir / "report.html";
  std::ofstream(page) << report_html(sample_report());

  const std::string dom = run(chromium("--dump-dom file://" + page.string() + " 2>/dev/null", dir));
  EXPECT_NE(dom.find("id=\"arms\""), std::string::npos) << dom.substr(0, 500);
  EXPECT_NE(dom.find("contaminated"), std::string::npos);
  EXPECT_NE(dom.find("<polyline"), std::string::npos);
  EXPECT_NE(dom.find("diverged"), std::string::npos);

  const fs::path png = dir / "shot.png";
  run(chromium("--screenshot=" + png.string() + " --window-size=1200,900 file://" + page.string() +
                   " >/dev/null 2>&1",
               dir));
  ASSERT_TRUE(fs::exists(png)) << "Chromium wrote no screenshot";
  std::ifstream f(png, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  probe_test::Image img;
  std::string why;
  ASSERT_TRUE(probe_test::png_decode(bytes, img, why)) << why;
  EXPECT_EQ(img.width, 1200);
  EXPECT_EQ(img.height, 900);
  size_t non_white = 0, red = 0, blue = 0;
  std::set<uint32_t> colours;
  for (size_t i = 0; i + 2 < img.rgb.size(); i += 3) {
    const int r = img.rgb[i], g = img.rgb[i + 1], b = img.rgb[i + 2];
    if (r < 245 || g < 245 || b < 245) non_white++;
    colours.insert(uint32_t(r) << 16 | uint32_t(g) << 8 | uint32_t(b));
    // The arms' colours: clean #d62728, contaminated #1f77b4 (lines, markers, legend).
    if (std::abs(r - 0xd6) < 12 && std::abs(g - 0x27) < 12 && std::abs(b - 0x28) < 12) red++;
    if (std::abs(r - 0x1f) < 12 && std::abs(g - 0x77) < 12 && std::abs(b - 0xb4) < 12) blue++;
  }
  EXPECT_GT(non_white, img.rgb.size() / 3 / 50) << "screenshot is (nearly) blank";
  EXPECT_GT(colours.size(), 20u) << "screenshot has too few colours to hold text and a chart";
  EXPECT_GT(red, 200u) << "the clean arm's line is not on the screenshot";
  EXPECT_GT(blue, 200u) << "the contaminated arm's line is not on the screenshot";
  if (!HasFailure()) fs::remove_all(dir);
}

}  // namespace html_test
}  // namespace invar::probe
