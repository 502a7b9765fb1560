// Element-wise ops: SIMD levels equal the scalar expressions bit for bit.
#include "kernels/elementwise.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/detmath.h"
#include "kernel_test_util.h"

namespace invar {
namespace {

using test::bit_diff;

TEST(Elementwise, SimdEqualsScalarBits) {
  for (int64_t n : {1, 7, 8, 9, 16, 17, 100, 4096, 4101}) {
    const auto a = test::randn(size_t(n), 1, 6.0f);
    const auto b = test::randn(size_t(n), 2, 2.0f);
    std::vector<float> sw_ref(a.size()), sg_ref = b;
    for (int64_t i = 0; i < n; ++i) {
      sw_ref[size_t(i)] = det_silu(a[size_t(i)]) * b[size_t(i)];
      sg_ref[size_t(i)] = b[size_t(i)] * det_sigmoid(a[size_t(i)]);
    }
    test::for_each_simd_level([&](SimdLevel) {
      std::vector<float> sw(a.size()), sg = b;
      swiglu(a.data(), b.data(), n, sw.data());
      sigmoid_mul_inplace(sg.data(), a.data(), n);
      EXPECT_EQ(bit_diff(sw, sw_ref), "") << "swiglu n=" << n;
      EXPECT_EQ(bit_diff(sg, sg_ref), "") << "sigmoid_mul n=" << n;
    });
  }
  std::vector<float> y = {1.0f, 2.0f}, x = {0.5f, -4.0f};
  add_inplace(y.data(), x.data(), 2);
  EXPECT_EQ(y[0], 1.5f);
  EXPECT_EQ(y[1], -2.0f);
  scale_add_inplace(y.data(), x.data(), 2.0f, 2);
  EXPECT_EQ(y[0], 2.5f);
  EXPECT_EQ(y[1], -10.0f);
}

// The two GELU forms of the vision tower against their float64 definitions.
TEST(Elementwise, GeluMatchesFloat64) {
  const auto x = test::randn(20000, 9, 4.0f);
  std::vector<float> yt(x.size()), ye(x.size());
  gelu_tanh(x.data(), int64_t(x.size()), yt.data());
  gelu_erf(x.data(), int64_t(x.size()), ye.data());
  double worst_t = 0, worst_e = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double t = 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    const double e = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    worst_t = std::max(worst_t, std::fabs(yt[i] - t) / (1.0 + std::fabs(t)));
    worst_e = std::max(worst_e, std::fabs(ye[i] - e) / (1.0 + std::fabs(e)));
  }
  std::printf("gelu_tanh max rel err %.3g, gelu_erf %.3g\n", worst_t, worst_e);
  EXPECT_LE(worst_t, 1e-6);
  EXPECT_LE(worst_e, 1e-6);
}

}  // namespace
}  // namespace invar
