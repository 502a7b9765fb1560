// Quantisers of the K-quants (layouts: quant/blocks.h). Each super-block of 256 is cut into
// sub-blocks (16 × 16 for Q2_K, Q3_K, Q6_K; 8 × 32 for Q4_K, Q5_K); every sub-block gets its own
// fitted scale (and min), those are quantised against the F16 super-block scale(s), and the codes
// are then chosen with the sub-scales exactly as stored.
#include <cstring>

#include "quant/blocks.h"
#include "quant/quantize_fit.h"

namespace invar {

using namespace quant_fit;

namespace {

// Affine sub-blocks (Q2_K, Q4_K, Q5_K): fits n_sub sub-blocks of `len` values on codes [0, nmax],
// quantises the scales and mins on `sbits`-bit unsigned integers against F16 d and dmin, and
// returns the codes (q[256]) and the integer scales / mins.
struct AffineK {
  float d = 0, dmin = 0;
  int sc[16] = {}, mn[16] = {};
  int q[kQK_K] = {};
};

AffineK affine_k(const float* x, int n_sub, int len, int nmax, int smax) {
  AffineK r;
  float s[16], m[16], max_s = 0, max_m = 0;
  for (int j = 0; j < n_sub; ++j) {
    affine_fit(x + j * len, len, nmax, s[j], m[j]);
    max_s = s[j] > max_s ? s[j] : max_s;
    max_m = m[j] > max_m ? m[j] : max_m;
  }
  r.d = f16_round(max_s / float(smax));
  r.dmin = f16_round(max_m / float(smax));
  const float ids = r.d != 0 ? 1.0f / r.d : 0.0f;
  const float idm = r.dmin != 0 ? 1.0f / r.dmin : 0.0f;
  for (int j = 0; j < n_sub; ++j) {
    r.sc[j] = clampi(nearest(s[j] * ids), 0, smax);
    // A sub-block whose scale rounds to 0 decodes to −min: keep it at 0 rather than a constant.
    r.mn[j] = r.sc[j] == 0 ? 0 : clampi(nearest(m[j] * idm), 0, smax);
    const float dl = r.d * float(r.sc[j]);
    const float ml = r.dmin * float(r.mn[j]);
    for (int i = 0; i < len; ++i) {
      const int k = j * len + i;
      r.q[k] = dl > 0 ? clampi(nearest((x[k] + ml) / dl), 0, nmax) : 0;
    }
  }
  return r;
}

// Symmetric sub-blocks of 16 (Q3_K, Q6_K): sub-scales for codes in [-half, half), quantised on
// signed integers in [-smin, smin) against the F16 d; codes returned offset by +half.
struct SymmetricK {
  float d = 0;
  int sc[16] = {};
  int q[kQK_K] = {};
};

SymmetricK symmetric_k(const float* x, int half, int smin) {
  SymmetricK r;
  float s[16], max_s = 0;
  for (int j = 0; j < 16; ++j) {
    s[j] = symmetric_scale(x + 16 * j, 16, half);
    if (std::fabs(s[j]) > std::fabs(max_s)) max_s = s[j];
  }
  r.d = f16_round(max_s / float(-smin));
  const float id = r.d != 0 ? 1.0f / r.d : 0.0f;
  for (int j = 0; j < 16; ++j) {
    r.sc[j] = clampi(nearest(s[j] * id), -smin, smin - 1);
    const float dl = r.d * float(r.sc[j]);
    for (int i = 0; i < 16; ++i) {
      const int k = 16 * j + i;
      r.q[k] = dl != 0 ? clampi(nearest(x[k] / dl), -half, half - 1) + half : half;
    }
  }
  return r;
}

// 2-bit codes of a Q2_K / Q3_K super-block: element e = 128·h + 32·s + k goes to bits 2s of
// qs[32·h + k].
void pack_2bit(const int* q, uint8_t* qs) {
  std::memset(qs, 0, kQK_K / 4);
  for (int e = 0; e < kQK_K; ++e) {
    const int h = e / 128, s = (e % 128) / 32, k = e % 32;
    qs[32 * h + k] |= uint8_t((q[e] & 3) << (2 * s));
  }
}

// Q4_K / Q5_K: 6-bit scales and mins into 12 bytes (the inverse of k4_scale_min).
void pack_k4_scales(const int* sc, const int* mn, uint8_t* p) {
  std::memset(p, 0, kKScaleSize);
  for (int j = 0; j < 4; ++j) {
    p[j] = uint8_t(sc[j]);
    p[j + 4] = uint8_t(mn[j]);
  }
  for (int j = 4; j < 8; ++j) {
    p[j + 4] = uint8_t((sc[j] & 0xF) | ((mn[j] & 0xF) << 4));
    p[j - 4] |= uint8_t((sc[j] >> 4) << 6);
    p[j] |= uint8_t((mn[j] >> 4) << 6);
  }
}

// Q4_K / Q5_K codes: element e = 64·j + 32·part + l in nibble `part` of qs[32·j + l].
void pack_k4_nibbles(const int* q, uint8_t* qs) {
  for (int j = 0; j < 4; ++j)
    for (int l = 0; l < 32; ++l)
      qs[32 * j + l] = uint8_t((q[64 * j + l] & 0xF) | ((q[64 * j + 32 + l] & 0xF) << 4));
}

}  // namespace

void quantize_q2_k(const float* x, BlockQ2_K& b) {
  const AffineK r = affine_k(x, 16, 16, 3, 15);
  b.d = f32_to_f16(r.d);
  b.dmin = f32_to_f16(r.dmin);
  for (int j = 0; j < 16; ++j) b.scales[j] = uint8_t(r.sc[j] | (r.mn[j] << 4));
  pack_2bit(r.q, b.qs);
}

void quantize_q3_k(const float* x, BlockQ3_K& b) {
  const SymmetricK r = symmetric_k(x, 4, 32);
  b.d = f32_to_f16(r.d);
  int sc[16];
  for (int j = 0; j < 16; ++j) sc[j] = r.sc[j] + 32;
  // The inverse of dequant.cpp's q3_scales.
  for (int i = 0; i < 4; ++i) {
    b.scales[i] = uint8_t((sc[i] & 0xF) | ((sc[8 + i] & 0xF) << 4));
    b.scales[4 + i] = uint8_t((sc[4 + i] & 0xF) | ((sc[12 + i] & 0xF) << 4));
    b.scales[8 + i] = uint8_t((sc[i] >> 4) | ((sc[4 + i] >> 4) << 2) | ((sc[8 + i] >> 4) << 4) |
                              ((sc[12 + i] >> 4) << 6));
  }
  pack_2bit(r.q, b.qs);
  // Third bit: hmask[e % 32] bit e / 32, set when the code is ≥ 4 (no −4 on dequantisation).
  std::memset(b.hmask, 0, sizeof b.hmask);
  for (int e = 0; e < kQK_K; ++e)
    if (r.q[e] >= 4) b.hmask[e % 32] |= uint8_t(1 << (e / 32));
}

void quantize_q4_k(const float* x, BlockQ4_K& b) {
  const AffineK r = affine_k(x, 8, 32, 15, 63);
  b.d = f32_to_f16(r.d);
  b.dmin = f32_to_f16(r.dmin);
  pack_k4_scales(r.sc, r.mn, b.scales);
  pack_k4_nibbles(r.q, b.qs);
}

void quantize_q5_k(const float* x, BlockQ5_K& b) {
  const AffineK r = affine_k(x, 8, 32, 31, 63);
  b.d = f32_to_f16(r.d);
  b.dmin = f32_to_f16(r.dmin);
  pack_k4_scales(r.sc, r.mn, b.scales);
  pack_k4_nibbles(r.q, b.qs);
  // Fifth bit of element 64·j + 32·part + l: bit 2j + part of qh[l].
  std::memset(b.qh, 0, sizeof b.qh);
  for (int e = 0; e < kQK_K; ++e)
    if (r.q[e] & 16) b.qh[e % 32] |= uint8_t(1 << (e / 32));
}

void quantize_q6_k(const float* x, BlockQ6_K& b) {
  const SymmetricK r = symmetric_k(x, 32, 128);
  b.d = f32_to_f16(r.d);
  for (int j = 0; j < 16; ++j) b.scales[j] = int8_t(r.sc[j]);
  // Element e = 128·h + 32·g + l: low 4 bits in ql[64·h + 32·(g & 1) + l] (nibble g / 2), high
  // 2 bits at bits 2g of qh[32·h + l].
  std::memset(b.ql, 0, sizeof b.ql);
  std::memset(b.qh, 0, sizeof b.qh);
  for (int e = 0; e < kQK_K; ++e) {
    const int h = e / 128, g = (e % 128) / 32, l = e % 32;
    b.ql[64 * h + 32 * (g & 1) + l] |= uint8_t((r.q[e] & 0xF) << (4 * (g / 2)));
    b.qh[32 * h + l] |= uint8_t((r.q[e] >> 4) << (2 * g));
  }
}

}  // namespace invar
