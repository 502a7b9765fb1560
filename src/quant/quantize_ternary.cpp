// Quantisers of the ternary types TQ1_0 and TQ2_0 and of MXFP4 (layouts: quant/blocks.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "quant/blocks.h"
#include "quant/iq_grids.h"
#include "quant/quantize_fit.h"

namespace invar {

using namespace quant_fit;

namespace {

// The least-squares ternary scale of n values: with the k largest magnitudes on ±d and the rest
// on 0, the error is Σx² − (Σ_k |x|)² / k at d = Σ_k |x| / k; the best k is found by sorting.
float ternary_scale(const float* x, int n) {
  float a[kQK_K];
  for (int i = 0; i < n; ++i) a[i] = std::fabs(x[i]);
  std::sort(a, a + n, std::greater<float>());
  double sum = 0, best = 0;
  float d = 0;
  for (int k = 1; k <= n; ++k) {
    sum += a[k - 1];
    if (sum * sum / k > best) {
      best = sum * sum / k;
      d = float(sum / k);
    }
  }
  return d;
}

// Codes t in [0, top] of x / d + 1 (t − 1 the ternary, TQ2_0 also +2), 1 where d is 0.
void ternary_codes(const float* x, float d, int top, int* t) {
  const float id = d != 0 ? 1.0f / d : 0.0f;
  for (int i = 0; i < kQK_K; ++i) t[i] = clampi(nearest(x[i] * id) + 1, 0, top);
}

// Five trits (the first most significant) as ggml packs them: the base-3 number scaled to a byte,
// rounded up, so that dequant_row's (byte · 3^n mod 256) · 3 >> 8 reads trit n back.
uint8_t pack_trits(const int* t, int count, int stride) {
  int q = 0;
  for (int n = 0; n < count; ++n) q = q * 3 + t[n * stride];
  for (int n = count; n < 5; ++n) q *= 3;
  return uint8_t((q * 256 + 242) / 243);
}

}  // namespace

void quantize_tq1_0(const float* x, BlockTQ1_0& b) {
  const float d = f16_round(ternary_scale(x, kQK_K));
  b.d = f32_to_f16(d);
  int t[kQK_K];
  ternary_codes(x, d, 2, t);
  // Elements 0..159: byte m < 32 holds 32n + m; 160..239: byte 32 + m holds 160 + 16n + m;
  // 240..255: qh[m] holds 240 + 4n + m.
  for (int m = 0; m < 32; ++m) b.qs[m] = pack_trits(t + m, 5, 32);
  for (int m = 0; m < 16; ++m) b.qs[32 + m] = pack_trits(t + 160 + m, 5, 16);
  for (int m = 0; m < 4; ++m) b.qh[m] = pack_trits(t + 240 + m, 4, 4);
}

void quantize_tq2_0(const float* x, BlockTQ2_0& b) {
  const float d = f16_round(ternary_scale(x, kQK_K));
  b.d = f32_to_f16(d);
  int t[kQK_K];
  ternary_codes(x, d, 3, t);  // code 3 is +2·d
  std::memset(b.qs, 0, sizeof b.qs);
  for (int e = 0; e < kQK_K; ++e) {
    const int h = e / 128, l = (e % 128) / 32, m = e % 32;
    b.qs[32 * h + m] |= uint8_t(t[e] << (2 * l));
  }
}

// MXFP4: the E8M0 exponent of ggml's reference (the largest magnitude's binary exponent − 2, so
// it lands on 4 to 8 times the half scale, below the top value 12) and the next one up, whichever
// gives the smaller error; each value takes its nearest E2M1 code.
void quantize_mxfp4(const float* x, BlockMXFP4& b) {
  float amax = 0;
  for (int i = 0; i < kQK; ++i) amax = std::max(amax, std::fabs(x[i]));
  auto code_of = [](float v, float d) {
    int best = 0;
    for (int k = 1; k < 16; ++k)
      if (std::fabs(float(kMXFP4Values[k]) * d - v) < std::fabs(float(kMXFP4Values[best]) * d - v))
        best = k;
    return best;
  };
  int e0 = 0;
  if (amax > 0) {
    int ex;
    std::frexp(amax, &ex);  // amax in [2^(ex−1), 2^ex)
    e0 = clampi(ex - 1 - 2 + 127, 0, 253);
  }
  double best_err = INFINITY;
  for (int e = e0; e <= e0 + 1; ++e) {
    const float d = mxfp4_half_scale(uint8_t(e));
    int q[kQK];
    double err = 0;
    for (int i = 0; i < kQK; ++i) {
      q[i] = code_of(x[i], d);
      const double r = double(kMXFP4Values[q[i]]) * d - x[i];
      err += r * r;
    }
    if (err < best_err) {
      best_err = err;
      b.e = uint8_t(e);
      for (int j = 0; j < kQK / 2; ++j) b.qs[j] = uint8_t(q[j] | (q[j + kQK / 2] << 4));
    }
    if (amax == 0) break;
  }
}

}  // namespace invar
