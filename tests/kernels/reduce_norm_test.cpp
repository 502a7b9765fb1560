// Canonical reductions and row norms: every SIMD level equals the scalar reference bit for bit;
// the references agree with float64 within the stated tolerances.
#include <gtest/gtest.h>

#include <cmath>

#include "kernel_test_util.h"
#include "kernels/norm.h"
#include "kernels/reduce.h"

namespace invar {
namespace {

using test::bit_diff;

const int64_t kLengths[] = {0, 1, 2, 7, 15, 16, 17, 31, 32, 33, 100, 255, 256, 1000, 4099};

TEST(Reduce, SimdEqualsReferenceBits) {
  test::for_each_simd_level([](SimdLevel) {
    for (int64_t n : kLengths) {
      const auto a = test::randn(size_t(n), uint32_t(n) + 1);
      const auto b = test::randn(size_t(n), uint32_t(n) + 2);
      EXPECT_EQ(test::float_bits(reduce_sum(a.data(), n)),
                test::float_bits(reduce_sum_ref(a.data(), n)))
          << n;
      EXPECT_EQ(test::float_bits(reduce_sum_sq(a.data(), n)),
                test::float_bits(reduce_sum_sq_ref(a.data(), n)))
          << n;
      EXPECT_EQ(test::float_bits(reduce_dot(a.data(), b.data(), n)),
                test::float_bits(reduce_dot_ref(a.data(), b.data(), n)))
          << n;
    }
  });
}

// The canonical order is observable: a left-to-right sum of these values gives 0 (the 3 and the 1
// vanish next to 1e8), the lane sums and the fixed tree give 4.
TEST(Reduce, CanonicalOrder) {
  std::vector<float> x(32, 0.0f);
  x[0] = 1e8f;    // lane 0
  x[8] = 1.0f;    // lane 8
  x[16] = -1e8f;  // lane 0 again: lane 0 = 0
  x[4] = 3.0f;    // lane 4
  float l[16] = {};
  for (int i = 0; i < 32; ++i) l[i % 16] += x[i];
  float s8[8], s4[4], s2[2];
  for (int i = 0; i < 8; ++i) s8[i] = l[i] + l[i + 8];
  for (int i = 0; i < 4; ++i) s4[i] = s8[i] + s8[i + 4];
  for (int i = 0; i < 2; ++i) s2[i] = s4[i] + s4[i + 2];
  const float expect = s2[0] + s2[1];
  test::for_each_simd_level([&](SimdLevel) {
    EXPECT_EQ(test::float_bits(reduce_sum(x.data(), 32)), test::float_bits(expect));
  });
  EXPECT_EQ(expect, 4.0f);  // lane 0 cancels before the 1 in lane 8 is added
}

TEST(Reduce, ReferenceCloseToFloat64) {
  for (int64_t n : kLengths) {
    const auto a = test::randn(size_t(n), uint32_t(n) + 5);
    const auto b = test::randn(size_t(n), uint32_t(n) + 6);
    double s = 0, sa = 0, sq = 0, dot = 0, dota = 0;
    for (int64_t i = 0; i < n; ++i) {
      s += a[i], sa += std::fabs(a[i]), sq += double(a[i]) * a[i];
      dot += double(a[i]) * b[i], dota += std::fabs(double(a[i]) * b[i]);
    }
    // 16 sequential lanes of n/16 terms, then 4 tree levels: |err| ≤ (n/16 + 5)·2^-24·Σ|term|.
    const double k = (double(n) / 16 + 5) * 0x1p-24;
    EXPECT_LE(std::fabs(reduce_sum_ref(a.data(), n) - s), k * sa + 1e-30) << n;
    EXPECT_LE(std::fabs(reduce_sum_sq_ref(a.data(), n) - sq), (k + 0x1p-24) * sq + 1e-30) << n;
    EXPECT_LE(std::fabs(reduce_dot_ref(a.data(), b.data(), n) - dot), (k + 0x1p-24) * dota + 1e-30)
        << n;
  }
}

struct NormCase {
  int64_t m, n;
};
const NormCase kNormCases[] = {{1, 1}, {3, 16}, {2, 24}, {5, 100}, {4, 128}, {2, 1000}, {1, 2048}};

TEST(Norm, SimdEqualsReferenceBits) {
  test::for_each_simd_level([](SimdLevel) {
    for (const auto& c : kNormCases) {
      const size_t sz = size_t(c.m * c.n);
      const auto x = test::randn(sz, 11, 3.0f);
      const auto z = test::randn(sz, 12, 2.0f);
      const auto w = test::randn(size_t(c.n), 13);
      std::vector<float> ref(sz), got(sz);
      rmsnorm_rows_ref(x.data(), w.data(), c.m, c.n, 1e-6f, ref.data());
      rmsnorm_rows(x.data(), w.data(), c.m, c.n, 1e-6f, got.data());
      EXPECT_EQ(bit_diff(got, ref), "") << "rmsnorm " << c.m << "x" << c.n;
      // In place (y == x) gives the same bits.
      std::vector<float> inplace = x;
      rmsnorm_rows(inplace.data(), w.data(), c.m, c.n, 1e-6f, inplace.data());
      EXPECT_EQ(bit_diff(inplace, ref), "") << "rmsnorm in place";
      l2norm_rows_ref(x.data(), c.m, c.n, 1e-6f, ref.data());
      l2norm_rows(x.data(), c.m, c.n, 1e-6f, got.data());
      EXPECT_EQ(bit_diff(got, ref), "") << "l2norm " << c.m << "x" << c.n;
      rmsnorm_gated_rows_ref(x.data(), w.data(), z.data(), c.m, c.n, 1e-6f, ref.data());
      rmsnorm_gated_rows(x.data(), w.data(), z.data(), c.m, c.n, 1e-6f, got.data());
      EXPECT_EQ(bit_diff(got, ref), "") << "gated " << c.m << "x" << c.n;
    }
  });
}

TEST(Norm, ReferenceCloseToFloat64) {
  for (const auto& c : kNormCases) {
    const size_t sz = size_t(c.m * c.n);
    const auto x = test::randn(sz, 21, 3.0f);
    const auto z = test::randn(sz, 22, 2.0f);
    const auto w = test::randn(size_t(c.n), 23);
    const float eps = 1e-6f;
    std::vector<float> rms(sz), l2(sz), gated(sz);
    rmsnorm_rows_ref(x.data(), w.data(), c.m, c.n, eps, rms.data());
    l2norm_rows_ref(x.data(), c.m, c.n, eps, l2.data());
    rmsnorm_gated_rows_ref(x.data(), w.data(), z.data(), c.m, c.n, eps, gated.data());
    std::vector<double> e_rms(sz), e_l2(sz), e_gated(sz);
    for (int64_t r = 0; r < c.m; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < c.n; ++i) ss += double(x[r * c.n + i]) * x[r * c.n + i];
      const double rs = 1.0 / std::sqrt(ss / c.n + eps);
      const double l2s = 1.0 / std::max(std::sqrt(ss), double(eps));
      for (int64_t i = 0; i < c.n; ++i) {
        const size_t k = size_t(r * c.n + i);
        e_rms[k] = x[k] * rs * w[i];
        e_l2[k] = x[k] * l2s;
        e_gated[k] = e_rms[k] * (z[k] / (1.0 + std::exp(-double(z[k]))));
      }
    }
    // Outputs are O(1..5): a few float ulps.
    EXPECT_LE(test::max_abs_diff(rms, e_rms), 5e-6) << c.m << "x" << c.n;
    EXPECT_LE(test::max_abs_diff(l2, e_l2), 1e-6) << c.m << "x" << c.n;
    EXPECT_LE(test::max_abs_diff(gated, e_gated), 2e-5) << c.m << "x" << c.n;
  }
}

// LayerNorm (vision tower): the dispatching sums give the reference's bits at every SIMD level,
// and both are within float rounding of the float64 formula.
TEST(LayerNorm, SimdEqualsReferenceAndFloat64) {
  for (int64_t n : {1, 7, 16, 17, 64, 256, 1000}) {
    const auto x = test::randn(size_t(3 * n), uint32_t(n), 3.0f);
    const auto w = test::randn(size_t(n), 5, 1.0f);
    const auto b = test::randn(size_t(n), 6, 1.0f);
    std::vector<float> ref(x.size());
    layernorm_rows_ref(x.data(), w.data(), b.data(), 3, n, 1e-6f, ref.data());
    test::for_each_simd_level([&](SimdLevel) {
      std::vector<float> y = x;  // in place
      layernorm_rows(y.data(), w.data(), b.data(), 3, n, 1e-6f, y.data());
      EXPECT_EQ(bit_diff(y, ref), "") << "n=" << n;
    });
    for (int64_t r = 0; r < 3; ++r) {
      const float* xr = x.data() + r * n;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < n; ++i) mean += xr[i];
      mean /= double(n);
      for (int64_t i = 0; i < n; ++i) var += (xr[i] - mean) * (xr[i] - mean);
      const double scale = 1.0 / std::sqrt(var / double(n) + 1e-6);
      for (int64_t i = 0; i < n; ++i) {
        const double want = (xr[i] - mean) * scale * w[size_t(i)] + b[size_t(i)];
        EXPECT_NEAR(ref[size_t(r * n + i)], want, 2e-5 * (1.0 + std::fabs(want))) << n;
      }
    }
  }
}

}  // namespace
}  // namespace invar
