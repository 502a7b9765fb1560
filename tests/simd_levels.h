// The SIMD levels a test iterates, and proof that each one's kernels ran.
//
// INVAR_REQUIRE_SIMD (comma-separated --simd names, e.g. "avx2,avx512"; `.ci/run` derives it from
// the CPU's flags) names levels that must be exercised: one this build or CPU cannot run is a
// test failure, not a silent omission. Whether a level ran is read from the dispatchers' own
// counters (simd_calls), not from simd_active() after simd_set(), which cannot differ.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/simd.h"

namespace invar::test {

// The levels INVAR_REQUIRE_SIMD names; an unknown name is a failure.
inline std::vector<SimdLevel> simd_required() {
  std::vector<SimdLevel> out;
  const char* env = std::getenv("INVAR_REQUIRE_SIMD");
  std::string_view rest = env ? env : "";
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view name = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (name.empty()) continue;
    if (const auto level = simd_parse(name)) {
      out.push_back(*level);
    } else {
      ADD_FAILURE() << "INVAR_REQUIRE_SIMD names '" << name << "' (expected off, avx2, avx512)";
    }
  }
  return out;
}

// Every level this CPU runs (≤ simd_detect()), scalar first. A required level above
// simd_detect() fails the calling test.
inline std::vector<SimdLevel> simd_levels_to_test() {
  for (SimdLevel r : simd_required()) {
    EXPECT_LE(int(r), int(simd_detect()))
        << "INVAR_REQUIRE_SIMD requires " << simd_name(r) << ", but this CPU runs at most "
        << simd_name(simd_detect()) << " (simd_detect: AVX-512 needs F, BW, VL, DQ, BF16, VNNI)";
  }
  std::vector<SimdLevel> out;
  for (int l = 0; l <= int(simd_detect()); ++l) out.push_back(SimdLevel(l));
  return out;
}

// Selects `level` for its lifetime (restoring the previous one after) and, when
// expect_kernels_ran() is called, checks that kernels dispatched at that level ran in between.
class SimdLevelRun {
 public:
  explicit SimdLevelRun(SimdLevel level) : level_(level) {
    simd_set(level);
    calls_before_ = simd_calls(level);
  }
  ~SimdLevelRun() { simd_set(saved_); }
  SimdLevelRun(const SimdLevelRun&) = delete;
  SimdLevelRun& operator=(const SimdLevelRun&) = delete;

  void expect_kernels_ran() const {
    EXPECT_GT(simd_calls(level_), calls_before_)
        << "no kernel dispatched at simd " << simd_name(level_) << " ran";
  }

 private:
  SimdLevel saved_ = simd_active();
  SimdLevel level_;
  uint64_t calls_before_ = 0;
};

}  // namespace invar::test
