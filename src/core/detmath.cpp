// Deterministic math (rule N3). Each function is a fixed sequence of IEEE-754 operations; FMA is
// always explicit (std::fma is correctly rounded, so it is the same bits with or without a
// hardware FMA). The float exp/sigmoid/silu sequences are repeated lane-wise in detmath_simd.h.
#include "core/detmath.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/detmath_consts.h"

namespace invar {
namespace {

using namespace detmath;

float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
double bits_to_double(uint64_t u) {
  double d;
  std::memcpy(&d, &u, 8);
  return d;
}
uint64_t double_to_bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
}

// 1/k! for the double Taylor polynomials (constant-folded with correct rounding).
constexpr double inv_fact(int k) {
  double f = 1.0;
  for (int i = 2; i <= k; ++i) f *= i;  // exact to 18!; 19!, 20! rounded (tail terms only)
  return 1.0 / f;
}

// e^y in double: 2^n · Σ_{i≤13} r^i/i!, |r| ≤ ln2/2 (truncation < 2^-60 relative).
double exp_d(double y) {
  if (y != y) return y;
  if (y > 709.0) return std::numeric_limits<double>::infinity();
  if (y < -708.0) return 0.0;
  constexpr double kMagic = 6755399441055744.0;           // 1.5·2^52
  constexpr double kLn2HiD = 6.93147180369123816490e-01;  // 32 significant bits: n·hi exact
  constexpr double kLn2LoD = 1.90821492927058770002e-10;
  const double n = (y * 1.44269504088896338700e+00 + kMagic) - kMagic;
  double r = std::fma(n, -kLn2HiD, y);
  r = std::fma(n, -kLn2LoD, r);
  double p = inv_fact(13);
  for (int k = 12; k >= 0; --k) p = std::fma(p, r, inv_fact(k));
  const int64_t ni = int64_t(n);
  return p * bits_to_double(uint64_t(ni + 1023) << 52);
}

// ln x in double for x > 0: x = m·2^e, m in [√½, √2), s = (m−1)/(m+1),
// ln m = 2s + 2s·Σ_{i≥1} s^{2i}/(2i+1) (|s| ≤ 0.172, 11 terms: < 2^-60 relative).
double log_d(double x) {
  if (x != x || x < 0.0) return std::numeric_limits<double>::quiet_NaN();
  if (x == 0.0) return -std::numeric_limits<double>::infinity();
  if (x == std::numeric_limits<double>::infinity()) return x;
  int64_t e = 0;
  if (x < 2.2250738585072014e-308) {
    x *= 18014398509481984.0;  // 2^54
    e = -54;
  }
  const uint64_t u = double_to_bits(x);
  e += int64_t((u >> 52) & 0x7ff) - 1023;
  double m = bits_to_double((u & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
  if (m > 1.41421356237309504880) {
    m *= 0.5;
    e += 1;
  }
  const double f = m - 1.0;
  const double s = f / (2.0 + f);
  const double s2 = s * s;
  double p = 1.0 / 23.0;
  for (int k = 21; k >= 3; k -= 2) p = std::fma(p, s2, 1.0 / k);
  const double lnm = std::fma(2.0 * s * s2, p, 2.0 * s);
  const double ed = double(e);
  return std::fma(ed, 6.93147180369123816490e-01, std::fma(ed, 1.90821492927058770002e-10, lnm));
}

}  // namespace

float det_exp(float x) {
  if (x != x) return x;
  if (x > kExpHi) return std::numeric_limits<float>::infinity();
  if (x < kExpLo) return 0.0f;
  const float t = x * kLog2e;
  const float nf = (t + kRoundMagic) - kRoundMagic;
  float r = std::fma(nf, -kLn2Hi, x);
  r = std::fma(nf, -kLn2Lo, r);
  float p = kExpP5;
  p = std::fma(p, r, kExpP4);
  p = std::fma(p, r, kExpP3);
  p = std::fma(p, r, kExpP2);
  p = std::fma(p, r, kExpP1);
  p = std::fma(p, r, kExpP0);
  const float r2 = r * r;
  float y = std::fma(p, r2, r);
  y = y + 1.0f;
  // 2^n as two normal factors: n in [−126, 128] and either half fits the exponent range.
  const int32_t n = int32_t(nf);
  const int32_t n1 = n >> 1;
  const int32_t n2 = n - n1;
  y = y * bits_to_float(uint32_t(n1 + 127) << 23);
  y = y * bits_to_float(uint32_t(n2 + 127) << 23);
  return y;
}

float det_log(float x) {
  if (x != x) return x;
  if (x < 0.0f) return std::numeric_limits<float>::quiet_NaN();
  if (x == 0.0f) return -std::numeric_limits<float>::infinity();
  if (x == std::numeric_limits<float>::infinity()) return x;
  int32_t e = 0;
  if (x < 1.17549435e-38f) {
    x *= 8388608.0f;  // 2^23: subnormal to normal
    e = -23;
  }
  const uint32_t u = float_to_bits(x);
  e += int32_t((u >> 23) & 0xff) - 127;
  float m = bits_to_float((u & 0x007fffffu) | 0x3f800000u);
  if (m > kSqrt2) {
    m *= 0.5f;
    e += 1;
  }
  const float f = m - 1.0f;  // exact (Sterbenz)
  const float z = f * f;
  float p = kLogP8;
  p = std::fma(p, f, kLogP7);
  p = std::fma(p, f, kLogP6);
  p = std::fma(p, f, kLogP5);
  p = std::fma(p, f, kLogP4);
  p = std::fma(p, f, kLogP3);
  p = std::fma(p, f, kLogP2);
  p = std::fma(p, f, kLogP1);
  p = std::fma(p, f, kLogP0);
  const float ef = float(e);
  float y = (p * f) * z;
  y = std::fma(ef, kLogLn2Lo, y);
  y = std::fma(z, -0.5f, y);
  float r = f + y;
  r = std::fma(ef, kLogLn2Hi, r);
  return r;
}

// ln(1+x) = ln(u)·x/(u−1) with u = 1+x rounded: the quotient cancels u's rounding error
// (Goldberg, "What every computer scientist should know…", Theorem 4).
float det_log1p(float x) {
  if (x != x) return x;
  const float u = 1.0f + x;
  if (u == 1.0f) return x;
  if (u == std::numeric_limits<float>::infinity()) return u;
  const float lu = det_log(u);
  if (u <= 0.0f) return lu;  // −inf at x = −1, NaN below
  return lu * (x / (u - 1.0f));
}

float det_sigmoid(float x) {
  return 1.0f / (1.0f + det_exp(-x));
}

// x/(1+e^−x): one rounding fewer than x·sigmoid(x); the SIMD copies use the same division.
float det_silu(float x) {
  return x / (1.0f + det_exp(-x));
}

// erf x = 2/√π · Σ_n c_n x^(2n+1),  c_n = (−1)^n / (n! (2n+1)), summed in double by Horner's rule
// in x² over the first 20, 36 or 72 terms for |x| < 1, 2, 4 (the first term left out is below
// 1e−17 of the sum; near |x| = 4 the alternating terms reach ~1e5 and cost ~1e−11), then rounded
// once to float. For |x| ≥ 4, 1 − erf x < 1.6e−8, under half the float spacing below 1, so the
// rounded result is exactly ±1. The coefficients are constants of the build (constexpr, IEEE
// double); the GELU of the vision merger (nn.GELU(), the erf form) is the user.
namespace {

constexpr int kErfTerms = 72;

struct ErfCoefficients {
  double c[kErfTerms];
  constexpr ErfCoefficients() : c() {
    double fact = 1.0;  // n!
    for (int n = 0; n < kErfTerms; ++n) {
      if (n > 0) fact = fact * double(n);
      const double mag = 1.0 / (fact * double(2 * n + 1));
      c[n] = n % 2 == 0 ? mag : -mag;
    }
  }
};
constexpr ErfCoefficients kErf;

}  // namespace

float det_erf(float x) {
  if (x != x) return x;
  if (x >= 4.0f) return 1.0f;
  if (x <= -4.0f) return -1.0f;
  const double xd = double(x);
  const double x2 = xd * xd;
  const float ax = x < 0.0f ? -x : x;
  const int terms = ax < 1.0f ? 20 : ax < 2.0f ? 36 : kErfTerms;
  double sum = kErf.c[terms - 1];
  for (int n = terms - 2; n >= 0; --n) {
    const double p = sum * x2;
    sum = p + kErf.c[n];
  }
  const double r = sum * xd;
  return float(r * 1.1283791670955126);  // 2/√π
}

float det_softplus(float x) {
  return x > 20.0f ? x : det_log1p(det_exp(x));
}

float det_rsqrt(float x) {
  return 1.0f / std::sqrt(x);
}

// Cody–Waite reduction by π/2 split in three doubles (FMA keeps each n·p_i exact before the
// single rounding), then Taylor polynomials on |r| ≤ π/4 (sin to r^19, cos to r^20).
void det_sincos(double x, double* s, double* c) {
  if (x != x || x == std::numeric_limits<double>::infinity() ||
      x == -std::numeric_limits<double>::infinity()) {
    *s = *c = std::numeric_limits<double>::quiet_NaN();
    return;
  }
  constexpr double kMagic = 6755399441055744.0;  // 1.5·2^52
  constexpr double kTwoOverPi = 6.36619772367581382433e-01;
  constexpr double kP1 = 1.5707963267948966;
  constexpr double kP2 = 6.123233995736766e-17;
  constexpr double kP3 = -1.4973849048591698e-33;
  const double n = (x * kTwoOverPi + kMagic) - kMagic;
  double r = std::fma(n, -kP1, x);
  r = std::fma(n, -kP2, r);
  r = std::fma(n, -kP3, r);
  const double r2 = r * r;
  // sin r = r + r³·S(r²)
  double ps = -inv_fact(19);
  for (int k = 17; k >= 3; k -= 2) ps = std::fma(ps, r2, ((k / 2) % 2 ? -1.0 : 1.0) * inv_fact(k));
  const double sn = std::fma(r2 * r, ps, r);
  // cos r = 1 − r²/2 + r⁴·C(r²), written so the large terms are added last (fdlibm __kernel_cos).
  double pc = inv_fact(20);
  for (int k = 18; k >= 4; k -= 2) pc = std::fma(pc, r2, ((k / 2) % 2 ? -1.0 : 1.0) * inv_fact(k));
  const double hz = 0.5 * r2;
  const double w = 1.0 - hz;
  const double cs = w + (((1.0 - w) - hz) + (r2 * r2) * pc);
  const int64_t q = int64_t(n) & 3;
  switch (q) {
    case 0:
      *s = sn;
      *c = cs;
      break;
    case 1:
      *s = cs;
      *c = -sn;
      break;
    case 2:
      *s = -sn;
      *c = -cs;
      break;
    default:
      *s = -cs;
      *c = sn;
      break;
  }
}

double det_log_d(double x) {
  return log_d(x);
}

double det_pow(double base, double e) {
  if (e == 0.0) return 1.0;
  return exp_d(e * log_d(base));
}

}  // namespace invar
