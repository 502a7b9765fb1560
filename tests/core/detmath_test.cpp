// detmath: accuracy against libm (used here only, as the yardstick), special values, and
// bit-equality of the AVX2 / AVX-512 lane-wise copies with the scalar functions.
#include "core/detmath.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "core/simd.h"
#include "detmath_lanes.h"
#include "simd_levels.h"

namespace invar {
namespace detmath_test {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// |got − ref| in units of the float spacing at ref (ref in double or long double).
double ulp_err_f(float got, long double ref) {
  if (std::isnan(got) || std::isnan(double(ref)))
    return std::isnan(got) == std::isnan(double(ref)) ? 0 : 1e30;
  if (std::isinf(double(ref)) || std::isinf(got)) return got == float(ref) ? 0 : 1e30;
  int e;
  std::frexp(double(ref), &e);
  const double ulp = std::ldexp(1.0, std::max(e - 24, -149));
  return double(std::fabs((long double)got - ref)) / ulp;
}
double ulp_err_d(double got, long double ref) {
  int e;
  std::frexp(double(ref), &e);
  const double ulp = std::ldexp(1.0, std::max(e - 53, -1074));
  return double(std::fabs((long double)got - ref) / (long double)ulp);
}

// Samples of [lo, hi]: uniform in value, plus a stride through every float bit pattern there.
std::vector<float> samples(float lo, float hi, int n_uniform, uint32_t stride) {
  std::vector<float> xs;
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int i = 0; i < n_uniform; ++i) xs.push_back(u(rng));
  for (uint64_t b = 0; b < 0x100000000ull; b += stride) {
    const float f = from_bits(uint32_t(b));
    if (f >= lo && f <= hi) xs.push_back(f);
  }
  return xs;
}

double max_ulp(const std::vector<float>& xs, float (*f)(float), long double (*ref)(long double),
               float* worst_x) {
  double worst = 0;
  for (float x : xs) {
    const double e = ulp_err_f(f(x), ref((long double)x));
    if (e > worst) {
      worst = e;
      *worst_x = x;
    }
  }
  return worst;
}

long double ref_exp(long double x) {
  return std::exp(x);
}
long double ref_log(long double x) {
  return std::log(x);
}
long double ref_log1p(long double x) {
  return std::log1p(x);
}
long double ref_sigmoid(long double x) {
  return 1.0L / (1.0L + std::exp(-x));
}
long double ref_silu(long double x) {
  return x / (1.0L + std::exp(-x));
}
long double ref_softplus(long double x) {
  return x > 20 ? x : std::log1p(std::exp(x));
}
long double ref_erf(long double x) {
  return std::erf(x);
}
long double ref_rsqrt(long double x) {
  return 1.0L / std::sqrt(x);
}

void expect_ulp(const char* name, float lo, float hi, float (*f)(float),
                long double (*ref)(long double), double bound) {
  float wx = 0;
  const double u = max_ulp(samples(lo, hi, 100000, 4099), f, ref, &wx);
  std::printf("%-12s [%g, %g]: max %.3f ulp (at %.9g)\n", name, lo, hi, u, wx);
  EXPECT_LE(u, bound) << name << " worst at x = " << wx;
}

TEST(Detmath, AccuracyAgainstLibm) {
  expect_ulp("det_exp", -87.3f, 88.7f, det_exp, ref_exp, 2.0);
  expect_ulp("det_log", 1e-45f, 3e38f, det_log, ref_log, 2.0);
  expect_ulp("det_log1p", -0.9999f, 1e30f, det_log1p, ref_log1p, 2.5);
  expect_ulp("det_log1p", -1e-3f, 1e-3f, det_log1p, ref_log1p, 2.5);
  expect_ulp("det_sigmoid", -80.0f, 80.0f, det_sigmoid, ref_sigmoid, 2.5);
  expect_ulp("det_silu", -80.0f, 80.0f, det_silu, ref_silu, 2.5);
  expect_ulp("det_softplus", -80.0f, 80.0f, det_softplus, ref_softplus, 3.0);
  expect_ulp("det_rsqrt", 1e-38f, 3e38f, det_rsqrt, ref_rsqrt, 1.5);
  expect_ulp("det_erf", -6.0f, 6.0f, det_erf, ref_erf, 1.0);
  expect_ulp("det_erf", -1e-3f, 1e-3f, det_erf, ref_erf, 1.0);
}

TEST(Detmath, SincosAgainstLibm) {
  std::mt19937_64 rng(7);
  for (double range : {10.0, 1e5, 1e7}) {
    std::uniform_real_distribution<double> u(-range, range);
    double worst = 0, wx = 0;
    for (int i = 0; i < 100000; ++i) {
      const double x = u(rng);
      double s, c;
      det_sincos(x, &s, &c);
      const double e =
          std::max(ulp_err_d(s, sinl((long double)x)), ulp_err_d(c, cosl((long double)x)));
      if (e > worst) worst = e, wx = x;
    }
    std::printf("det_sincos |x| <= %g: max %.3f ulp (double) at %.17g\n", range, worst, wx);
    EXPECT_LE(worst, 1.5) << "range " << range;
  }
  // RoPE arguments: integer positions times inverse frequencies.
  double worst = 0;
  for (int64_t pos = 0; pos < 300000; pos += 23) {
    for (int j = 0; j < 32; j += 5) {
      const double x = double(pos) * det_pow(1e7, -2.0 * j / 64.0);
      double s, c;
      det_sincos(x, &s, &c);
      worst =
          std::max({worst, ulp_err_d(s, sinl((long double)x)), ulp_err_d(c, cosl((long double)x))});
    }
  }
  std::printf("det_sincos at RoPE angles: max %.3f ulp (double)\n", worst);
  EXPECT_LE(worst, 1.5);
}

TEST(Detmath, PowAgainstLibm) {
  double worst = 0;
  for (double base : {2.0, 100.0, 10000.0, 1e6, 1e7, 5e6}) {
    for (int j = 0; j <= 256; ++j) {
      const double e = -2.0 * j / 256.0;
      const double got = det_pow(base, e);
      const long double ref = powl((long double)base, (long double)e);
      worst = std::max(worst, ulp_err_d(got, ref));
    }
  }
  std::printf("det_pow (RoPE frequencies): max %.3f ulp (double)\n", worst);
  EXPECT_LE(worst, 64.0);  // e·ln(base) is rounded once: |e·ln b| ≤ 33 here
  EXPECT_EQ(det_pow(10000.0, 0.0), 1.0);
  EXPECT_EQ(det_pow(1.0, -0.5), 1.0);
}

// RoPE scaling's correction range takes ln of context lengths and factors.
TEST(Detmath, LogDoubleAgainstLibm) {
  double worst = 0;
  for (double x : {1e-300, 0.01, 0.5, 0.999999, 1.0, 1.000001, 2.0, 3.14159, 4.0, 4096.0, 262144.0,
                   1e7, 1e300}) {
    for (int k = 0; k < 64; ++k) {
      const double v = x * (1.0 + k / 64.0);
      worst = std::max(worst, ulp_err_d(det_log_d(v), logl((long double)v)));
    }
  }
  std::printf("det_log_d: max %.3f ulp (double)\n", worst);
  EXPECT_LE(worst, 2.0);
  EXPECT_EQ(det_log_d(1.0), 0.0);
  EXPECT_TRUE(std::isnan(det_log_d(-1.0)));
  EXPECT_EQ(det_log_d(0.0), -std::numeric_limits<double>::infinity());
}

TEST(Detmath, SpecialValues) {
  EXPECT_TRUE(std::isnan(det_exp(kNaN)));
  EXPECT_EQ(det_exp(kInf), kInf);
  EXPECT_EQ(det_exp(-kInf), 0.0f);
  EXPECT_EQ(det_exp(0.0f), 1.0f);
  EXPECT_EQ(det_exp(-0.0f), 1.0f);
  EXPECT_EQ(det_exp(89.0f), kInf);
  EXPECT_EQ(det_exp(-88.0f), 0.0f);
  EXPECT_GT(det_exp(88.7f), 3.0e38f);
  EXPECT_EQ(det_log(1.0f), 0.0f);
  EXPECT_EQ(det_log(0.0f), -kInf);
  EXPECT_TRUE(std::isnan(det_log(-1.0f)));
  EXPECT_TRUE(std::isnan(det_log(kNaN)));
  EXPECT_EQ(det_log(kInf), kInf);
  EXPECT_EQ(det_log1p(0.0f), 0.0f);
  EXPECT_EQ(det_log1p(1e-10f), 1e-10f);
  EXPECT_EQ(det_log1p(-1.0f), -kInf);
  EXPECT_TRUE(std::isnan(det_log1p(-2.0f)));
  EXPECT_EQ(det_log1p(kInf), kInf);
  EXPECT_EQ(det_sigmoid(0.0f), 0.5f);
  EXPECT_EQ(det_sigmoid(200.0f), 1.0f);
  EXPECT_EQ(det_sigmoid(-200.0f), 0.0f);
  EXPECT_EQ(det_silu(0.0f), 0.0f);
  EXPECT_EQ(det_silu(200.0f), 200.0f);
  EXPECT_EQ(det_softplus(30.0f), 30.0f);
  EXPECT_EQ(det_softplus(-200.0f), 0.0f);
  EXPECT_EQ(det_rsqrt(4.0f), 0.5f);
  EXPECT_EQ(det_rsqrt(0.0f), kInf);
  double s, c;
  det_sincos(0.0, &s, &c);
  EXPECT_EQ(s, 0.0);
  EXPECT_EQ(c, 1.0);
  det_sincos(std::nan(""), &s, &c);
  EXPECT_TRUE(std::isnan(s) && std::isnan(c));
}

// Inputs covering every class: random bit patterns (NaNs, infinities, subnormals, huge and tiny
// values), the cut-offs and their neighbours, and a dense sweep of the useful range.
std::vector<float> lane_inputs() {
  std::vector<float> xs = {0.0f,
                           -0.0f,
                           kInf,
                           -kInf,
                           kNaN,
                           -kNaN,
                           88.72283935546875f,
                           std::nextafter(88.72283935546875f, 100.0f),
                           -87.33654022216797f,
                           std::nextafter(-87.33654022216797f, -100.0f),
                           1e-45f,
                           -1e-45f};
  std::mt19937 rng(99);
  for (int i = 0; i < 200000; ++i) xs.push_back(from_bits(uint32_t(rng())));
  std::uniform_real_distribution<float> u(-100.0f, 100.0f);
  for (int i = 0; i < 200000; ++i) xs.push_back(u(rng));
  while (xs.size() % 16) xs.push_back(1.0f);
  return xs;
}

void expect_lanes_equal(test::LaneFn fn, float (*scalar)(float), const char* name) {
  const std::vector<float> xs = lane_inputs();
  std::vector<float> ref(xs.size()), got(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) ref[i] = scalar(xs[i]);
  int levels = 0;
  for (SimdLevel level : test::simd_levels_to_test()) {
    if (level == SimdLevel::scalar) continue;  // the reference itself
    ++levels;
    if (level == SimdLevel::avx2)
      test::lanes_avx2(fn, xs.data(), got.data(), int64_t(xs.size()));
    else
      test::lanes_avx512(fn, xs.data(), got.data(), int64_t(xs.size()));
    size_t bad = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      // A NaN's sign and payload are not part of the contract (the compiler may rewrite 1 + (−x)
      // as 1 − x): any NaN matches any NaN; every other result must match bit for bit.
      if (std::isnan(got[i]) && std::isnan(ref[i])) continue;
      if (bits(got[i]) != bits(ref[i])) {
        if (bad++ < 5)
          ADD_FAILURE() << name << " " << simd_name(level) << " x=" << xs[i] << " (0x" << std::hex
                        << bits(xs[i]) << ") scalar 0x" << bits(ref[i]) << " simd 0x"
                        << bits(got[i]) << std::dec;
      }
    }
    EXPECT_EQ(bad, 0u) << name << " " << simd_name(level);
  }
  if (levels == 0) GTEST_SKIP() << "no AVX2 on this CPU";
}

TEST(Detmath, SimdExpBitIdentical) {
  expect_lanes_equal(test::LaneFn::exp, det_exp, "exp");
}
TEST(Detmath, SimdSigmoidBitIdentical) {
  expect_lanes_equal(test::LaneFn::sigmoid, det_sigmoid, "sigmoid");
}
TEST(Detmath, SimdSiluBitIdentical) {
  expect_lanes_equal(test::LaneFn::silu, det_silu, "silu");
}

}  // namespace detmath_test
}  // namespace invar
