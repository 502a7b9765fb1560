// quantize_row → dequant_row round trips: error bounds per type on Gaussian-like weights, on
// super-blocks whose sub-blocks differ in scale by 2^7 (the per-sub-block scales must follow),
// and exact cases (zeros; values already on a type's grid).
#include "quant/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "quant/dequant.h"
#include "quant/dtype.h"

namespace invar {
namespace quantize_test {

struct Bound {
  DType type;
  double max_rel_rms;  // sqrt(mean (y − x)²) / sqrt(mean x²) on unit-variance values
};

// Measured values (printed by the test) are about two thirds of these; of the low-bit types
// (nearest grid point, least-squares scales) about 0.7: IQ3_S 0.127, IQ3_XXS 0.177, IQ2_S 0.236,
// IQ2_XS 0.286, IQ2_XXS 0.328, IQ1_M 0.405, IQ1_S 0.435, TQ2_0 0.386, TQ1_0 0.418, MXFP4 0.111.
constexpr Bound kBounds[] = {
    {DType::Q4_0, 0.14},  {DType::Q4_1, 0.12},   {DType::Q5_0, 0.07},    {DType::Q5_1, 0.06},
    {DType::Q8_0, 0.007}, {DType::Q2_K, 0.40},   {DType::Q3_K, 0.22},    {DType::Q4_K, 0.11},
    {DType::Q5_K, 0.055}, {DType::Q6_K, 0.025},  {DType::IQ4_NL, 0.12},  {DType::IQ4_XS, 0.12},
    {DType::F16, 0.001},  {DType::BF16, 0.005},  {DType::IQ3_S, 0.18},   {DType::IQ3_XXS, 0.25},
    {DType::IQ2_S, 0.33}, {DType::IQ2_XS, 0.40}, {DType::IQ2_XXS, 0.46}, {DType::IQ1_M, 0.57},
    {DType::IQ1_S, 0.61}, {DType::TQ2_0, 0.55},  {DType::TQ1_0, 0.59},   {DType::MXFP4, 0.16},
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
// range of 8 fits the 4-bit scales of Q2_K and the 3-bit odd ones 1..15 of IQ1_S / IQ1_M; the
// 6-bit ones of the others reach 63.) TQ1_0 / TQ2_0 have one scale per 256 and are left out.
TEST(Quantize, SubBlockScalesFollowTheirSubBlocks) {
  std::vector<float> x = gaussian_like(256 * 16, 5);
  for (size_t i = 0; i < x.size(); ++i) x[i] *= float(1 << ((i / 32) % 4));
  for (const Bound& b : kBounds) {
    if (dtype_block_size(b.type) != 256 || b.type == DType::TQ1_0 || b.type == DType::TQ2_0)
      continue;
    const std::vector<float> y = round_trip(b.type, x);
    double worst = 0;
    for (size_t s = 0; s < x.size(); s += 32) worst = std::max(worst, rel_rms(&x[s], &y[s], 32));
    EXPECT_LT(worst, 2.5 * b.max_rel_rms) << dtype_name(b.type) << " worst sub-block " << worst;
  }
}

TEST(Quantize, ZerosStayZeroAndGridValuesAreExact) {
  const std::vector<float> zeros(512, 0.0f);
  for (DType t : kAllDTypes) {
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
  // Ternary values ±0.5, 0 (d = 0.5), and MXFP4's E2M1 values times 2^−3 (half scale 2^−2).
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.5f * float(int(i * 7 % 3) - 1);
  for (DType t : {DType::TQ1_0, DType::TQ2_0}) {
    const std::vector<float> y = round_trip(t, x);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i]) << dtype_name(t) << " at " << i;
  }
  constexpr float kE2M1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, 0, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (size_t i = 0; i < x.size(); ++i) x[i] = kE2M1[(i * 5) % 16] * 0.125f;
  const std::vector<float> y = round_trip(DType::MXFP4, x);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i]) << "mxfp4 at " << i;
}

// Values that the lattice types cannot place well (one large value among small ones, a constant
// block, alternating signs) still decode to finite values near the input.
TEST(Quantize, LowBitTypesDecodeAwkwardBlocks) {
  std::vector<float> x(256 * 4);
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t b = i / 256;
    x[i] = b == 0   ? (i % 256 == 7 ? 10.0f : 0.01f)
           : b == 1 ? 0.3f
           : b == 2 ? (i % 2 ? -1.0f : 1.0f)
                    : float(int(i % 9) - 4) * 1e-3f;
  }
  for (DType t : {DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS, DType::IQ3_S,
                  DType::IQ1_S, DType::IQ1_M, DType::TQ1_0, DType::TQ2_0, DType::MXFP4}) {
    const std::vector<float> y = round_trip(t, x);
    for (size_t s = 0; s < x.size(); s += 256) {
      for (size_t i = s; i < s + 256; ++i) ASSERT_TRUE(std::isfinite(y[i])) << dtype_name(t);
      EXPECT_LT(rel_rms(&x[s], &y[s], 256), 0.75) << dtype_name(t) << " block " << s / 256;
    }
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
