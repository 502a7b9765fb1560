// Helpers for the kernel tests: random data, bit comparison, and running a body once per SIMD
// level this CPU has (the level is restored afterwards).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/simd.h"
#include "simd_levels.h"

namespace invar::test {

inline std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

inline std::vector<float> uniform(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Empty if a and b are the same bits; otherwise the first mismatches, for the failure message.
inline std::string bit_diff(const float* a, const float* b, size_t n) {
  std::ostringstream os;
  int shown = 0;
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    if (float_bits(a[i]) == float_bits(b[i])) continue;
    ++count;
    if (shown++ < 4) os << " [" << i << "] " << a[i] << " vs " << b[i];
  }
  if (count == 0) return "";
  return std::to_string(count) + " of " + std::to_string(n) + " differ:" + os.str();
}
inline std::string bit_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return "size differs";
  return bit_diff(a.data(), b.data(), a.size());
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

// Runs body(level) for every level ≤ simd_detect() (a level INVAR_REQUIRE_SIMD requires and
// the CPU lacks fails the test), checking that the body ran kernels dispatched at that level.
template <class F>
void for_each_simd_level(F body) {
  for (SimdLevel level : simd_levels_to_test()) {
    SCOPED_TRACE(std::string("simd ") + std::string(simd_name(level)));
    const SimdLevelRun run(level);
    body(level);
    run.expect_kernels_ran();
  }
}

}  // namespace invar::test
