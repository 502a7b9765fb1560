// quantize_row → dequant_row round trips: error bounds per type on Gaussian-like weights, on
// super-blocks whose sub-blocks differ in scale by 2^7 (the per-sub-block scales must follow),
// and exact cases (zeros; values already on a type's grid).
#include "core/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "core/dequant.h"
#include "core/dtype.h"

namespace invar {
namespace quantize_test {

struct Bound {
  DType type;
  double max_rel_rms;  // sqrt(mean (y − x)²) / sqrt(mean x²) on unit-variance values
};

// Measured values (printed by the test) are about two thirds of these.
constexpr Bound kBounds[] = {
    {DType::Q4_0, 0.14},  {DType::Q4_1, 0.12},  {DType::Q5_0, 0.07},   {DType::Q5_1, 0.06},
    {DType::Q8_0, 0.007}, {DType::Q2_K, 0.40},  {DType::Q3_K, 0.22},   {DType::Q4_K, 0.11},
    {DType::Q5_K, 0.055}, {DType::Q6_K, 0.025}, {DType::IQ4_NL, 0.12}, {DType::IQ4_XS, 0.12},
    {DType::F16, 0.001},  {DType::BF16, 0.005},
};

// Unit-variance values: sum of four uniforms from a counter-based generator, centred.
std::vector<float> gaussian_like(int64_t n, uint64_t seed) {
  std::vector<float> v(size_t(n), 0.0f);
  uint64_t s = seed;
  for (auto& x : v) {
    double acc = 0;
    for (int k = 0; k < 4; ++k) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      acc += double(s >> 11) * 0x1.0p-53;
    }
    x = float((acc - 2.0) * 1.7320508075688772);
  }
  return v;
}

std::vector<float> round_trip(DType t, const std::vector<float>& x) {
  const int64_t n = int64_t(x.size());
  std::vector<uint8_t> q(size_t(dtype_row_bytes(t, n)));
  quantize_row(t, x.data(), q.data(), n);
  std::vector<float> y(static_cast<size_t>(n));
  dequant_row(t, q.data(), y.data(), n);
  return y;
}

double rel_rms(const float* x, const float* y, int64_t n) {
  double e = 0, s = 0;
  for (int64_t i = 0; i < n; ++i) {
    e += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
    s += double(x[i]) * x[i];
  }
  return std::sqrt(e / s);
}

TEST(Quantize, ErrorWithinBoundPerType) {
  const std::vector<float> x = gaussian_like(256 * 64, 11);
  for (const Bound& b : kBounds) {
    const std::vector<float> y = round_trip(b.type, x);
    const double r = rel_rms(x.data(), y.data(), int64_t(x.size()));
    std::printf("%-7s relative rms error %.4f (bound %.3f)\n",
                std::string(dtype_name(b.type)).c_str(), r, b.max_rel_rms);
    EXPECT_LT(r, b.max_rel_rms) << dtype_name(b.type);
    EXPECT_GT(r, 0.0) << dtype_name(b.type) << ": a lossy type reproduced random values exactly";
  }
}

// Sub-block j of every super-block is scaled by 2^(j mod 4): each sub-block's own error must stay
// small relative to its own magnitude, which only per-sub-block scales (and mins) achieve. (A
// range of 8 fits the 4-bit scales of Q2_K; the 6-bit ones of the others reach 63.)
TEST(Quantize, SubBlockScalesFollowTheirSubBlocks) {
  std::vector<float> x = gaussian_like(256 * 16, 5);
  for (size_t i = 0; i < x.size(); ++i) x[i] *= float(1 << ((i / 32) % 4));
  for (const Bound& b : kBounds) {
    if (dtype_block_size(b.type) != 256) continue;
    const std::vector<float> y = round_trip(b.type, x);
    double worst = 0;
    for (size_t s = 0; s < x.size(); s += 32) worst = std::max(worst, rel_rms(&x[s], &y[s], 32));
    EXPECT_LT(worst, 2.5 * b.max_rel_rms) << dtype_name(b.type) << " worst sub-block " << worst;
  }
}

TEST(Quantize, ZerosStayZeroAndGridValuesAreExact) {
  const std::vector<float> zeros(512, 0.0f);
  for (DType t : kAllDTypes) {
    if (!quantize_supported(t)) continue;
    const std::vector<float> y = round_trip(t, zeros);
    for (float v : y) ASSERT_EQ(v, 0.0f) << dtype_name(t);
  }
  // Integers −8..7 in every block: on the grid of Q4_0 (d = 1), Q5_0 (d = 1/2), Q4_1 (d = 1, m =
  // −8).
  std::vector<float> x(256);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 16) - 8);
  for (DType t : {DType::Q4_0, DType::Q5_0, DType::Q4_1}) {
    const std::vector<float> y = round_trip(t, x);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i]) << dtype_name(t) << " at " << i;
  }
}

// A partial block is a caller bug (the loader checks row lengths first): a check, not a guess.
TEST(QuantizeDeathTest, PartialBlocksAreACheckFailure) {
  std::vector<float> x(48, 1.0f);
  std::vector<uint8_t> q(64);
  EXPECT_DEATH(quantize_row(DType::Q4_0, x.data(), q.data(), 48), "block size 32");
  std::vector<float> y(48);
  EXPECT_DEATH(dequant_row(DType::Q4_K, q.data(), y.data(), 48), "block size 256");
}

}  // namespace quantize_test
}  // namespace invar
