// Element-wise ops: SIMD levels equal the scalar expressions bit for bit.
#include "kernels/elementwise.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace invar
