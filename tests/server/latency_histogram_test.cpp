// One histogram, two bucket layouts: invar's and vLLM's expositions of the same observations
// count exactly (cumulative, upper-inclusive bounds), with each layout's bound spelling.
#include <gtest/gtest.h>

#include <regex>

#include "server/server_metrics.h"

namespace invar::server {
namespace latency_histogram_test {

// The cumulative count of bucket `le` in an exposition.
long bucket(const std::string& text, const std::string& name, const std::string& le) {
  std::smatch m;
  const std::regex re(name + "_bucket\\{[^}]*le=\"" +
                      std::regex_replace(le, std::regex("\\+"), "\\+") + "\"\\} (\\d+)\n");
  return std::regex_search(text, m, re) ? std::stol(m[1]) : -1;
}

TEST(LatencyHistogram, BothLayoutsCountTheSameObservationsExactly) {
  LatencyHistogram h(vllm_ttft_bounds());
  // On a bound (counted in it), between bounds of one layout only, and past the last bound.
  for (double s : {0.0005, 0.001, 0.003, 0.005, 0.02, 0.75, 29.0, 100.0, 5000.0}) h.observe(s);
  const std::string invar = h.exposition("t", "help");
  EXPECT_EQ(bucket(invar, "t", "0.001"), 2);
  EXPECT_EQ(bucket(invar, "t", "0.0025"), 2);
  EXPECT_EQ(bucket(invar, "t", "0.005"), 4);
  EXPECT_EQ(bucket(invar, "t", "1"), 6);
  EXPECT_EQ(bucket(invar, "t", "30"), 7);
  EXPECT_EQ(bucket(invar, "t", "+Inf"), 9);
  EXPECT_NE(invar.find("\nt_count 9\n"), std::string::npos) << invar;

  const std::string v = h.exposition("v", "help", vllm_ttft_bounds(), "model_name=\"m\"");
  EXPECT_EQ(bucket(v, "v", "0.001"), 2);
  EXPECT_EQ(bucket(v, "v", "0.005"), 4);
  EXPECT_EQ(bucket(v, "v", "0.02"), 5);
  EXPECT_EQ(bucket(v, "v", "0.75"), 6);
  EXPECT_EQ(bucket(v, "v", "1.0"), 6) << "vLLM's clients write whole bounds as 1.0:\n" << v;
  EXPECT_EQ(bucket(v, "v", "40.0"), 7);
  EXPECT_EQ(bucket(v, "v", "160.0"), 8);
  EXPECT_EQ(bucket(v, "v", "2560.0"), 8);
  EXPECT_EQ(bucket(v, "v", "+Inf"), 9);
  EXPECT_NE(v.find("v_bucket{model_name=\"m\",le=\"0.001\"} 2\n"), std::string::npos) << v;
  EXPECT_NE(v.find("\nv_count{model_name=\"m\"} 9\n"), std::string::npos) << v;
  EXPECT_NE(v.find("\nv_sum{model_name=\"m\"} "), std::string::npos) << v;
  size_t buckets = 0;
  for (size_t p = 0; (p = v.find("v_bucket{", p)) != std::string::npos; ++p) ++buckets;
  EXPECT_EQ(buckets, vllm_ttft_bounds().size() + 1);
}

TEST(LatencyHistogram, VllmLayoutsAreVllms) {
  // vllm/v1/metrics/loggers.py: 22 TTFT bounds up to 2560 s, 19 inter-token bounds up to 80 s,
  // 21 e2e bounds up to 7680 s.
  EXPECT_EQ(vllm_ttft_bounds().size(), 22u);
  EXPECT_EQ(vllm_ttft_bounds().back(), 2560.0);
  EXPECT_EQ(vllm_itl_bounds().size(), 19u);
  EXPECT_EQ(vllm_itl_bounds().front(), 0.01);
  EXPECT_EQ(vllm_itl_bounds().back(), 80.0);
  EXPECT_EQ(vllm_e2e_bounds().size(), 21u);
  EXPECT_EQ(vllm_e2e_bounds().front(), 0.3);
  EXPECT_EQ(vllm_e2e_bounds().back(), 7680.0);
  for (const auto* b : {&vllm_ttft_bounds(), &vllm_itl_bounds(), &vllm_e2e_bounds()})
    EXPECT_TRUE(std::is_sorted(b->begin(), b->end()));
}

}  // namespace latency_histogram_test
}  // namespace invar::server
