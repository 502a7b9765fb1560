// Private to the quantisers: scale fitting shared by the legacy and the K-quant encoders.
#pragma once

#include <cmath>
#include <cstdint>

#include "quant/dtype.h"

namespace invar::quant_fit {

inline int nearest(float x) {
  return int(std::lrint(x));
}
inline int clampi(int v, int lo, int hi) {
  return v < lo ? lo : v > hi ? hi : v;
}
// The F32 value an F16 field will hold.
inline float f16_round(float x) {
  return f16_to_f32(f32_to_f16(x));
}

// Scale for signed codes in [-nmin, nmin - 1]: the value of largest magnitude maps to -nmin, the
// extreme with one more level (as ggml's reference quantisers do). 0 for an all-zero block.
inline float symmetric_scale(const float* x, int n, int nmin) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    if (a > amax) {
      amax = a;
      max = x[i];
    }
  }
  return amax == 0 ? 0.0f : max / float(-nmin);
}

// Affine fit x ≈ scale · q − m with q in [0, nmax] and m ≥ 0 (the K-quants subtract a
// non-negative min): starts from the min/max fit, then alternates rounding and a least-squares
// refit of (scale, m) a few times, keeping the best squared error.
inline void affine_fit(const float* x, int n, int nmax, float& scale, float& m) {
  float lo = 0, hi = x[0];
  for (int i = 0; i < n; ++i) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
  }
  if (hi <= lo) {
    scale = 0;
    m = -lo;
    return;
  }
  float s = (hi - lo) / float(nmax), mm = -lo;
  auto error_of = [&](float sc, float mn) {
    double e = 0;
    for (int i = 0; i < n; ++i) {
      const int q = sc > 0 ? clampi(nearest((x[i] + mn) / sc), 0, nmax) : 0;
      const double d = double(sc) * q - mn - x[i];
      e += d * d;
    }
    return e;
  };
  double best = error_of(s, mm);
  scale = s;
  m = mm;
  for (int it = 0; it < 4; ++it) {
    // Least squares of x_i = s·q_i − m over the current codes.
    double sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (int i = 0; i < n; ++i) {
      const int q = clampi(nearest((x[i] + mm) / s), 0, nmax);
      sq += q;
      sqq += double(q) * q;
      sx += x[i];
      sqx += double(q) * x[i];
    }
    const double det = n * sqq - sq * sq;
    if (det <= 0) break;
    double ns = (n * sqx - sq * sx) / det;
    double nm = (sq * sqx - sqq * sx) / det;  // = −(intercept)
    if (nm < 0) {                             // m must stay ≥ 0: refit the scale alone with m = 0
      nm = 0;
      ns = sqq > 0 ? sqx / sqq : 0;
    }
    if (!(ns > 0)) break;
    s = float(ns);
    mm = float(nm);
    const double e = error_of(s, mm);
    if (e < best) {
      best = e;
      scale = s;
      m = mm;
    }
  }
}

}  // namespace invar::quant_fit
