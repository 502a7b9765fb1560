// Private to q8_act_simd.h: the q8 profile's Q8_0 product for more than 4 activation rows, bit
// for bit q8_0_ref (q8_act.cpp).
//
// The canonical order adds block b's term (d·dx)·float(is_b) to float lane b mod 8, so each output
// needs, per 8 consecutive blocks, the 8 integer dot products side by side in one vector. The
// decode kernel (q8_0_row) gets them from 8 per-block vectors by horizontal adds (totals8). Here
// both operands are transposed once instead: a group of 8 blocks (8 × 32 codes) becomes 8
// vectors, vector j holding codes 4j .. 4j + 3 of block i in int32 lane i, so 8 dot-product
// steps leave block i's total in lane i with no horizontal add. The activations of a row block
// are transposed once per call (cost M·K), each weight row once per row block; a tile of
// activation rows × weight rows (AVX-512 2 × 4, AVX2 4 × 2) then runs over every group, the
// weight rows from L1, the activations from L2, and the float lanes of its 8 outputs in
// registers.
//
// AVX-512 VNNI: one 512-bit vector holds two groups (16 blocks), the first in lanes 0-7; the
// float step adds the first group's terms to the 8 lanes, then the second's, as the reference
// does. `vpdpbusd` multiplies unsigned by signed bytes: activations are stored as x + 128
// (x ^ 0x80) and each block starts from −128·Σw (integers: exact, |Σ| < 2^21). AVX2: |w| times x
// with w's sign (`vpsignb`), `vpmaddubsw` then `vpmaddwd` by ones, as the decode kernel.
//
// Missing blocks past K (the last group) have zero codes and zero scales: their term is +0, and
// adding +0 leaves a lane unchanged (a lane starts at +0 and is never −0).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/detmath_simd.h"  // <immintrin.h>, with GCC bug 105593 silenced
#include "kernels/matmul/q8_act.h"
#include "quant/blocks.h"

namespace invar::q8simd {
namespace {

#define Q80_INLINE inline __attribute__((always_inline))

#if defined(__AVX512BW__) && defined(__AVX512VNNI__)
constexpr bool kQ80Zmm = true;
#else
constexpr bool kQ80Zmm = false;
#endif
constexpr int64_t kQ80Groups = kQ80Zmm ? 2 : 1;         // groups of 8 blocks per vector
constexpr int64_t kQ80SpanBlocks = 8 * kQ80Groups;      // blocks per step of the tile
constexpr int64_t kQ80SpanBytes = 32 * kQ80SpanBlocks;  // their codes, transposed
// AVX-512: 2 rows × 4 outputs (the activations stream from L2 once per 4 weight rows; 8
// accumulators, 8 float lanes, 4 weight vectors and x fit its 32 registers); AVX2: 4 × 2.
constexpr int kQ80TileRows = kQ80Zmm ? 2 : 4, kQ80TileCols = kQ80Zmm ? 4 : 2;

// Blocks [0, cnt) (cnt ≤ 8) of 32 codes at first + i·stride, transposed: t[j] lane i = codes
// 4j .. 4j + 3 of block i; blocks past cnt are zero.
Q80_INLINE void q80_group(const uint8_t* first, int64_t stride, int64_t cnt, __m256i* t) {
  __m256i r[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    r[i] = i < cnt ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(first + i * stride))
                   : _mm256_setzero_si256();
  }
  __m256i a[8], b[8];
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    a[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
    a[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
  }
  // b[4h + c]: column c (c + 4 in the upper half) of rows 4h .. 4h + 3.
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    b[4 * h] = _mm256_unpacklo_epi64(a[4 * h], a[4 * h + 2]);
    b[4 * h + 1] = _mm256_unpackhi_epi64(a[4 * h], a[4 * h + 2]);
    b[4 * h + 2] = _mm256_unpacklo_epi64(a[4 * h + 1], a[4 * h + 3]);
    b[4 * h + 3] = _mm256_unpackhi_epi64(a[4 * h + 1], a[4 * h + 3]);
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    t[c] = _mm256_permute2x128_si256(b[c], b[4 + c], 0x20);
    t[c + 4] = _mm256_permute2x128_si256(b[c], b[4 + c], 0x31);
  }
}

// Where vector j of group g lies in a transposed row.
Q80_INLINE int64_t q80_at(int64_t g, int j) {
  return g / kQ80Groups * kQ80SpanBytes + j * 32 * kQ80Groups + g % kQ80Groups * 32;
}

// The scratch a call of q80_prefill uses for `rows` activation rows of K.
int64_t q80_scratch_bytes(int64_t rows, int64_t k) {
  const int64_t spans = (k / 32 + kQ80SpanBlocks - 1) / kQ80SpanBlocks;
  const int64_t row = spans * (kQ80SpanBytes + 4 * kQ80SpanBlocks);
  return (rows + 2 * kQ80TileCols) * row + 64;
}

// One pair of weight rows, transposed: codes (AVX-512: −128·Σw per block; AVX2: |codes|) and
// the F16 scales widened, zero past K.
struct Q80Panel {
  const uint8_t* codes[kQ80TileCols];
  const uint8_t* abs[kQ80TileCols];
  const int32_t* neg[kQ80TileCols];
  const float* d[kQ80TileCols];
};

// Weight row `row` (nb blocks) into codes / extra (abs codes or −128·Σw) / d, `spans` spans.
void q80_panel_fill(const uint8_t* row, int64_t nb, int64_t spans, uint8_t* codes, uint8_t* extra,
                    float* d) {
  for (int64_t g = 0; g < spans * kQ80Groups; ++g) {
    const int64_t cnt = std::clamp<int64_t>(nb - 8 * g, 0, 8);
    __m256i t[8];
    q80_group(row + 8 * g * int64_t(sizeof(BlockQ8_0)) + 2, sizeof(BlockQ8_0), cnt, t);
    __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(codes + q80_at(g, j)), t[j]);
      if constexpr (kQ80Zmm) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
        sum = _mm256_dpbusd_epi32(sum, _mm256_set1_epi8(char(0x80)), t[j]);
#endif
      } else {
        _mm256_store_si256(reinterpret_cast<__m256i*>(extra + q80_at(g, j)),
                           _mm256_sign_epi8(t[j], t[j]));
      }
    }
    if constexpr (kQ80Zmm) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(extra) + g,
                         _mm256_sub_epi32(_mm256_setzero_si256(), sum));
    }
    for (int64_t i = 0; i < 8; ++i) {
      uint16_t h = 0;
      if (i < cnt) std::memcpy(&h, row + (8 * g + i) * int64_t(sizeof(BlockQ8_0)), 2);
      d[8 * g + i] = _cvtsh_ss(h);
    }
  }
}

// R activation rows (transposed codes xt, scales xd; `stride` bytes / floats per row) × P panel
// rows over `spans` spans: y[r·ldy + p].
template <int R, int P>
Q80_INLINE void q80_tile(const uint8_t* xt, int64_t xt_stride, const float* xd, int64_t xd_stride,
                         const Q80Panel& pan, int64_t spans, float* y, int64_t ldy) {
  __m256 fl[R][P];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) fl[r][p] = _mm256_setzero_ps();
  for (int64_t s = 0; s < spans; ++s) {
    const int64_t at = s * kQ80SpanBytes;
#if defined(__AVX512BW__) && defined(__AVX512VNNI__)
    __m512i acc[R][P];
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const __m512i c = _mm512_load_si512(pan.neg[p] + 16 * s);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r][p] = c;
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      __m512i wv[P];
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) wv[p] = _mm512_load_si512(pan.codes[p] + at + 64 * j);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512i xv = _mm512_load_si512(xt + r * xt_stride + at + 64 * j);
#pragma GCC unroll 4
        for (int p = 0; p < P; ++p) acc[r][p] = _mm512_dpbusd_epi32(acc[r][p], xv, wv[p]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 dx = _mm512_load_ps(xd + r * xd_stride + 16 * s);
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        const __m512 dd = _mm512_mul_ps(_mm512_load_ps(pan.d[p] + 16 * s), dx);
        const __m512 t = _mm512_mul_ps(dd, _mm512_cvtepi32_ps(acc[r][p]));
        fl[r][p] = _mm256_add_ps(fl[r][p], _mm512_castps512_ps256(t));
        fl[r][p] = _mm256_add_ps(fl[r][p],
                                 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(t), 1)));
      }
    }
#else
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i acc[R][P];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) acc[r][p] = _mm256_setzero_si256();
    }
    // Not unrolled: GCC then schedules the products of several steps ahead and spills them
    // (16 registers: 8 accumulators, 4 weight vectors, x, ones, a product).
#pragma GCC unroll 1
    for (int j = 0; j < 8; ++j) {
      __m256i wv[P], aw[P];
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        wv[p] = _mm256_load_si256(reinterpret_cast<const __m256i*>(pan.codes[p] + at + 32 * j));
        aw[p] = _mm256_load_si256(reinterpret_cast<const __m256i*>(pan.abs[p] + at + 32 * j));
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256i xv =
            _mm256_load_si256(reinterpret_cast<const __m256i*>(xt + r * xt_stride + at + 32 * j));
#pragma GCC unroll 4
        for (int p = 0; p < P; ++p) {
          const __m256i pr = _mm256_maddubs_epi16(aw[p], _mm256_sign_epi8(xv, wv[p]));
          acc[r][p] = _mm256_add_epi32(acc[r][p], _mm256_madd_epi16(pr, ones));
        }
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256 dx = _mm256_load_ps(xd + r * xd_stride + 8 * s);
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        const __m256 dd = _mm256_mul_ps(_mm256_load_ps(pan.d[p] + 8 * s), dx);
        fl[r][p] = _mm256_add_ps(fl[r][p], _mm256_mul_ps(dd, _mm256_cvtepi32_ps(acc[r][p])));
      }
    }
#endif
  }
  // y = ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), as q8_0_row.
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const __m128 s4 =
          _mm_add_ps(_mm256_castps256_ps128(fl[r][p]), _mm256_extractf128_ps(fl[r][p], 1));
      const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
      y[r * ldy + p] = _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
    }
}

template <int P>
Q80_INLINE void q80_tiles(const uint8_t* xt, int64_t xt_stride, const float* xd, int64_t xd_stride,
                          const Q80Panel& pan, int64_t spans, int64_t rows, float* y, int64_t ldy) {
  constexpr int R = kQ80TileRows;
  int64_t r = 0;
  for (; r + R <= rows; r += R)
    q80_tile<R, P>(xt + r * xt_stride, xt_stride, xd + r * xd_stride, xd_stride, pan, spans,
                   y + r * ldy, ldy);
  const uint8_t* xr = xt + r * xt_stride;
  const float* dr = xd + r * xd_stride;
  if constexpr (R > 3)
    if (rows - r == 3) q80_tile<3, P>(xr, xt_stride, dr, xd_stride, pan, spans, y + r * ldy, ldy);
  if constexpr (R > 2)
    if (rows - r == 2) q80_tile<2, P>(xr, xt_stride, dr, xd_stride, pan, spans, y + r * ldy, ldy);
  if (rows - r == 1) q80_tile<1, P>(xr, xt_stride, dr, xd_stride, pan, spans, y + r * ldy, ldy);
}

// Outputs [n0, n1) × activation rows [rb, re) of a Q8_0 matrix; scratch: q80_scratch_bytes(re −
// rb, K) bytes, 64-byte aligned.
void q80_prefill(const QuantView& w, const Q8Rows& x, float* y, int64_t n0, int64_t n1, int64_t rb,
                 int64_t re, uint8_t* scratch) {
  const int64_t nb = x.k / 32, spans = (nb + kQ80SpanBlocks - 1) / kQ80SpanBlocks;
  const int64_t xt_stride = spans * kQ80SpanBytes, xd_stride = spans * kQ80SpanBlocks;
  const int64_t rows = re - rb;
  uint8_t* xt = scratch;
  auto* xd = reinterpret_cast<float*>(xt + rows * xt_stride);
  uint8_t* codes = reinterpret_cast<uint8_t*>(xd + rows * xd_stride);
  uint8_t* extra = codes + kQ80TileCols * xt_stride;
  auto* d = reinterpret_cast<float*>(extra + kQ80TileCols * xt_stride);
  // Activations: codes transposed (AVX-512: + 128), scales zero past K.
  const __m256i flip = kQ80Zmm ? _mm256_set1_epi8(char(0x80)) : _mm256_setzero_si256();
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* dst = xt + r * xt_stride;
    for (int64_t g = 0; g < spans * kQ80Groups; ++g) {
      __m256i t[8];
      q80_group(reinterpret_cast<const uint8_t*>(x.row_q(rb + r)) + 256 * g, 32,
                std::clamp<int64_t>(nb - 8 * g, 0, 8), t);
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j)
        _mm256_store_si256(reinterpret_cast<__m256i*>(dst + q80_at(g, j)),
                           _mm256_xor_si256(t[j], flip));
    }
    float* dr = xd + r * xd_stride;
    std::memcpy(dr, x.row_d(rb + r), size_t(nb) * 4);
    std::fill(dr + nb, dr + xd_stride, 0.0f);
  }
  Q80Panel pan{};
  for (int p = 0; p < kQ80TileCols; ++p) {
    pan.codes[p] = codes + p * xt_stride;
    pan.abs[p] = extra + p * xt_stride;
    pan.neg[p] = reinterpret_cast<const int32_t*>(extra + p * xt_stride);
    pan.d[p] = d + p * xd_stride;
  }
  for (int64_t n = n0; n < n1; n += kQ80TileCols) {
    const int np = int(std::min<int64_t>(kQ80TileCols, n1 - n));
    for (int p = 0; p < np; ++p)
      q80_panel_fill(w.data + (n + p) * w.row_bytes, nb, spans, codes + p * xt_stride,
                     extra + p * xt_stride, d + p * xd_stride);
    float* yn = y + rb * w.n + n;
    if (np == kQ80TileCols)
      q80_tiles<kQ80TileCols>(xt, xt_stride, xd, xd_stride, pan, spans, rows, yn, w.n);
    if constexpr (kQ80TileCols > 3)
      if (np == 3) q80_tiles<3>(xt, xt_stride, xd, xd_stride, pan, spans, rows, yn, w.n);
    if constexpr (kQ80TileCols > 2)
      if (np == 2) q80_tiles<2>(xt, xt_stride, xd, xd_stride, pan, spans, rows, yn, w.n);
    if (np == 1) q80_tiles<1>(xt, xt_stride, xd, xd_stride, pan, spans, rows, yn, w.n);
  }
}

#undef Q80_INLINE

}  // namespace
}  // namespace invar::q8simd
