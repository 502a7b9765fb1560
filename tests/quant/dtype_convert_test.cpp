// F16 and BF16 conversions (quant/dtype.h) against independent oracles written with float64:
// every F16 value decodes exactly, and narrowing rounds to nearest, ties to even, overflowing to
// infinity exactly where IEEE says.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "quant/dtype.h"

namespace invar {
namespace dtype_convert_test {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Value of an F16 bit pattern, from the IEEE definition.
double f16_value(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
  double v;
  if (exp == 0) {
    v = std::ldexp(double(man), -24);
  } else if (exp == 31) {
    v = man == 0 ? INFINITY : NAN;
  } else {
    v = std::ldexp(double(1024 + man), exp - 25);
  }
  return sign ? -v : v;
}

TEST(DTypeConvert, F16ToF32ExactForAllPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const double want = f16_value(uint16_t(h));
    const float got = f16_to_f32(uint16_t(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << h;
    } else {
      EXPECT_EQ(double(got), want) << std::hex << h;
      EXPECT_EQ(std::signbit(got), bool(h & 0x8000)) << std::hex << h;
    }
  }
}

// Round-to-nearest-even F16 of f by search: the oracle f32_to_f16 must match.
uint16_t f16_oracle(float f) {
  if (std::isnan(f)) return 0x7e00;
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double v = std::fabs(double(f));
  // Largest positive pattern lo with value <= v (patterns 0..0x7c00 are ordered by value).
  uint16_t lo = 0, hi = 0x7c00;
  if (v >= f16_value(0x7c00)) return sign | 0x7c00;
  while (hi - lo > 1) {
    const uint16_t mid = uint16_t((lo + hi) / 2);
    if (f16_value(mid) <= v)
      lo = mid;
    else
      hi = mid;
  }
  if (f16_value(lo) == v) return sign | lo;
  // Compare 2v with lo+up (both exact in float64): nearest, ties to the even pattern. One step
  // above the largest finite value, the "up" neighbour is 2^16, as IEEE rounds to infinity.
  const uint16_t up = uint16_t(lo + 1);
  const double up_value = up == 0x7c00 ? 65536.0 : f16_value(up);
  const double twice = 2 * v, sum = f16_value(lo) + up_value;
  if (twice < sum) return sign | lo;
  if (twice > sum) return sign | up;
  return sign | ((lo & 1) ? up : lo);
}

TEST(DTypeConvert, F32ToF16RoundsToNearestEven) {
  // Every F16 value round-trips; every midpoint between neighbours is a tie.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    for (uint32_t s : {0u, 0x8000u}) {
      const uint16_t pat = uint16_t(h | s);
      EXPECT_EQ(f32_to_f16(f16_to_f32(pat)), pat) << std::hex << pat;
      const double mid =
          (f16_value(uint16_t(h)) + (h + 1 == 0x7c00 ? 65536.0 : f16_value(uint16_t(h + 1)))) / 2;
      const float midf = float(s ? -mid : mid);
      ASSERT_EQ(double(std::fabs(midf)), mid);  // the midpoint is exact in F32
      EXPECT_EQ(f32_to_f16(midf), f16_oracle(midf)) << "midpoint above " << std::hex << h;
      // Just above and below the midpoint.
      const float above = std::nextafter(midf, s ? -INFINITY : INFINITY);
      const float below = std::nextafter(midf, 0.0f);
      EXPECT_EQ(f32_to_f16(above), f16_oracle(above)) << std::hex << h;
      EXPECT_EQ(f32_to_f16(below), f16_oracle(below)) << std::hex << h;
    }
  }
  EXPECT_EQ(f32_to_f16(65519.99f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);
  EXPECT_EQ(f32_to_f16(INFINITY), 0x7c00);
  EXPECT_EQ(f32_to_f16(-INFINITY), 0xfc00);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // tie with 0: to even
  EXPECT_EQ(f32_to_f16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(NAN))));
  // Random bit patterns over the whole F32 range.
  std::mt19937 rng(1);
  for (int i = 0; i < 200000; ++i) {
    const float f = float_of(rng());
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), f16_oracle(f)) << std::hexfloat << f;
  }
}

TEST(DTypeConvert, F32ToBF16RoundsToNearestEven) {
  std::mt19937 rng(2);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t u = rng();
    const float f = float_of(u);
    const uint16_t got = f32_to_bf16(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(got)));
      continue;
    }
    const uint16_t lo = uint16_t(u >> 16), up = uint16_t(lo + 1);
    const double a = bf16_to_f32(lo);
    // Above the largest finite magnitude the upper neighbour is infinity, at 2^128.
    const double b =
        (up & 0x7fff) == 0x7f80 ? std::copysign(std::ldexp(1.0, 128), a) : bf16_to_f32(up);
    const double twice = 2.0 * double(f), sum = a + b;
    uint16_t want;
    if (double(f) == a) {
      want = lo;
    } else if (std::fabs(twice) < std::fabs(sum)) {
      want = lo;
    } else if (std::fabs(twice) > std::fabs(sum)) {
      want = up;
    } else {
      want = (lo & 1) ? up : lo;
    }
    ASSERT_EQ(got, want) << std::hex << u;
  }
  EXPECT_EQ(f32_to_bf16(float_of(0x3f808000)), 0x3f80);  // tie, even stays
  EXPECT_EQ(f32_to_bf16(float_of(0x3f818000)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(bits_of(bf16_to_f32(0xbf80)), 0xbf800000u);
}

}  // namespace dtype_convert_test
}  // namespace invar
