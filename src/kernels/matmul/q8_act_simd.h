// Private to q8_act_avx2.cpp / q8_act_avx512.cpp: the q8 profile's kernels over 256-bit
// integer vectors, bit for bit the references of q8_act.cpp. Every integer sum is exact, so
// only the float steps have to follow the canonical order (q8_act.h), and they are the same
// scalar (K-quants) or 8-lane (Q8_0) operations as the reference's.
//
// Products of 8-bit codes: `vpmaddubsw` (unsigned weight code × signed activation, pairs summed
// to int16; no pair here reaches 2^15) then `vpmaddwd` with the sub-block's scale (int32). With
// AVX-512 VNNI, `vpdpwssd` fuses that multiply-add with the accumulation and Q8_0 uses
// `vpdpbusd` (|w| × sign-adjusted x, summed to int32): the same integers.
//
// Q8_0 on AVX-512 takes two blocks to a 512-bit register (q80_totals8).
//
// Each weight row is decoded once per group of up to 4 activation rows (the group's integer
// accumulators side by side); a group of rows whose codes fit about 256 KiB runs over every output
// of the range before the next group, so the codes stay in L2 while the weights stream. More than
// 4 rows go through tiles of 8 outputs (AVX-512 2 rows × 4 weight rows, AVX2 4 × 2;
// q8_act_prefill_kquant.h, q8_act_prefill_q8_0.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/detmath_simd.h"  // <immintrin.h>, with GCC bug 105593 silenced
#include "kernels/matmul/q8_act.h"
#include "kernels/matmul/q8_act_prefill_kquant.h"
#include "kernels/matmul/q8_act_prefill_q8_0.h"
#include "kernels/matmul/q8_act_simd_base.h"
#include "quant/blocks.h"

namespace invar::q8simd {
namespace {

// ---- quantiser ----

constexpr uint32_t kTinyBits = 0x1f800000, kInfBits = 0x7f800000;

// Codes of 32 floats (x · inv rounded to nearest even, as int8) into q.
Q8_INLINE void codes32(const float* x, __m256 inv, int8_t* q) {
  __m256i i[4];
#pragma GCC unroll 4
  for (int v = 0; v < 4; ++v)
    i[v] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * v), inv));
  const __m256i p =
      _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
  const __m256i o = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), o);
}

// One block of n (32 or 256) floats: codes into q, returns d (q8_act.h).
Q8_INLINE float quantize_block(const float* x, int n, int8_t* q) {
  if (n <= 0) return 0.0f;  // (never: n is 32 or 256)
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  __m256i mx = _mm256_setzero_si256();
  for (int j = 0; j < n; j += 8) mx = _mm256_max_epi32(mx, _mm256_and_si256(load(x + j), abs_mask));
  __m128i m = _mm_max_epi32(_mm256_castsi256_si128(mx), _mm256_extracti128_si256(mx, 1));
  m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0x4e));
  m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0xb1));
  const auto a = uint32_t(_mm_cvtsi128_si32(m));
  if (a < kTinyBits || a >= kInfBits) {
    std::memset(q, 0, size_t(n));
    return a < kTinyBits ? 0.0f : std::numeric_limits<float>::quiet_NaN();
  }
  float amax;
  std::memcpy(&amax, &a, 4);
  const __m256 inv = _mm256_set1_ps(127.0f / amax);
  for (int j = 0; j < n; j += 32) codes32(x + j, inv, q + j);
  return amax / 127.0f;
}

// Sums of each 16 codes of a 256-block, as int16.
Q8_INLINE void sums256(const int8_t* q, int16_t* s) {
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  __m256i quad[8];  // lane 0: group 2i's four sums of 4, lane 1: group 2i + 1's
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i)
    quad[i] = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, load(q + 32 * i)), ones16);
  __m256i g[2];
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const __m256i a = _mm256_hadd_epi32(quad[4 * h], quad[4 * h + 1]);
    const __m256i b = _mm256_hadd_epi32(quad[4 * h + 2], quad[4 * h + 3]);
    // lane 0: groups 8h + 0, 2, 4, 6; lane 1: 8h + 1, 3, 5, 7
    g[h] = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(a, b),
                                       _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  }
  const __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi32(g[0], g[1]), 0xd8);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(s), p);
}

void quantize(const float* x, const Q8Rows& out, int64_t r0, int64_t r1) {
  q8_quantize_rows(x, out, r0, r1, quantize_block, [](const int8_t* q, int16_t* s16, int16_t* s32) {
    sums256(q, s16);
    const __m128i p = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s16)),
                                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(s16 + 8)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(s32), p);
  });
}

// ---- Q4_K, Q5_K ----

// Weight row `row` × activation rows r0 .. r0 + R − 1: y[r][n].
template <bool kVnni, bool kFifth, int R>
Q8_INLINE void q45k_row(const uint8_t* row, const Q8Rows& x, int64_t r0, float* y, int64_t ldy) {
  constexpr int64_t kBytes = kFifth ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
  constexpr int kQs = kFifth ? 48 : 16;
  const __m256i m4 = _mm256_set1_epi8(0x0f), one8 = _mm256_set1_epi8(1);
  float acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  for (int64_t b = 0; b < x.k / 256; ++b) {
    const uint8_t* blk = row + b * kBytes;
    const __m256i sm16 = k4_scales_mins(blk);
    const __m128i mins16 = _mm256_extracti128_si256(sm16, 1);
    const __m256i sc2 = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sm16));
    __m256i is[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) is[r] = _mm256_setzero_si256();
    const uint8_t* qs = blk + kQs;
    __m256i hbits;
    if constexpr (kFifth) hbits = load(blk + 16);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      // int16 scales of sub-blocks 2j and 2j + 1 in every lane.
      const __m256i scl =
          _mm256_shuffle_epi8(sc2, _mm256_set1_epi16(int16_t((4 * j + 1) << 8 | 4 * j)));
      const __m256i sch =
          _mm256_shuffle_epi8(sc2, _mm256_set1_epi16(int16_t((4 * j + 3) << 8 | (4 * j + 2))));
      const __m256i qv = load(qs + 32 * j);
      __m256i lo = _mm256_and_si256(qv, m4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qv, 4), m4);
      if constexpr (kFifth) {
        lo = _mm256_or_si256(
            lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j), one8), 4));
        hi = _mm256_or_si256(
            hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j + 1), one8), 4));
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const int8_t* xq = x.row_q(r0 + r) + b * 256 + 64 * j;
        is[r] = madd_acc<kVnni>(is[r], _mm256_maddubs_epi16(lo, load(xq)), scl);
        is[r] = madd_acc<kVnni>(is[r], _mm256_maddubs_epi16(hi, load(xq + 32)), sch);
      }
    }
    const float d = f16_at(blk), dmin = f16_at(blk + 2);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m128i sub =
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.row_sums32(r0 + r) + 8 * b));
      // is and im reduced together: lanes [is, im, is, im], converted at once.
      const __m128i i4 =
          _mm_add_epi32(_mm256_castsi256_si128(is[r]), _mm256_extracti128_si256(is[r], 1));
      __m128i h = _mm_hadd_epi32(i4, _mm_madd_epi16(mins16, sub));
      h = _mm_hadd_epi32(h, h);
      const __m128 f = _mm_cvtepi32_ps(h);
      const float dx = x.row_d(r0 + r)[b];
      const float dd = d * dx, dm = dmin * dx;
      acc[r] =
          acc[r] + std::fma(-dm, _mm_cvtss_f32(_mm_shuffle_ps(f, f, 1)), dd * _mm_cvtss_f32(f));
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) y[r * ldy] = acc[r];
}

// ---- Q6_K ----

template <bool kVnni, int R>
Q8_INLINE void q6k_row(const uint8_t* row, const Q8Rows& x, int64_t r0, float* y, int64_t ldy) {
  const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
  float acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  for (int64_t b = 0; b < x.k / 256; ++b) {
    const auto* blk = reinterpret_cast<const BlockQ6_K*>(row + b * int64_t(sizeof(BlockQ6_K)));
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->scales));
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
    __m256i is[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      // − 32 · Σ_s sc_s · (x-sum of group s): the codes' offset.
      const __m256i c = _mm256_madd_epi16(sc16, load(x.row_sums(r0 + r) + 16 * b));
      is[r] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(c, 5));
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i a = load(blk->ql + 64 * h), bq = load(blk->ql + 64 * h + 32);
      const __m256i hb = load(blk->qh + 32 * h);
      __m256i u[4];
      // Two high bits of each code moved to bits 4-5 (16-bit shifts: what crosses a byte is
      // masked off).
      u[0] =
          _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30));
      u[1] = _mm256_or_si256(_mm256_and_si256(bq, m4),
                             _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30));
      u[2] =
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_and_si256(hb, m30));
      u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bq, 4), m4),
                             _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30));
      // The half's 8 int16 scales in both lanes; group s = 8h + 2g is element 2g.
      const __m256i sch = _mm256_permute2x128_si256(sc16, sc16, h ? 0x11 : 0x00);
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        // Scales of groups s, s + 1 in lanes 0 and 1.
        const __m256i scv = _mm256_shuffle_epi8(
            sch, _mm256_setr_m128i(_mm_set1_epi16(int16_t((4 * g + 1) << 8 | 4 * g)),
                                   _mm_set1_epi16(int16_t((4 * g + 3) << 8 | (4 * g + 2)))));
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const int8_t* xq = x.row_q(r0 + r) + b * 256 + 128 * h + 32 * g;
          is[r] = madd_acc<kVnni>(is[r], _mm256_maddubs_epi16(u[g], load(xq)), scv);
        }
      }
    }
    uint16_t dh;
    std::memcpy(&dh, &blk->d, 2);
    const float d = _cvtsh_ss(dh);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r] = acc[r] + (d * x.row_d(r0 + r)[b]) * float(hsum8(is[r]));
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) y[r * ldy] = acc[r];
}

// ---- Q8_0 ----

// |w| · (x with w's signs), pairs to int32.
template <bool kVnni>
Q8_INLINE __m256i dot32(__m256i aw, __m256i w, __m256i xv) {
  const __m256i sx = _mm256_sign_epi8(xv, w);
  if constexpr (kVnni) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), aw, sx);
#endif
  }
  return _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sx), _mm256_set1_epi16(1));
}

// The F16 scales of the cnt (≤ 8) Q8_0 blocks from p, zeros after: assembled in general
// registers, since eight 2-byte stores read back as one vector would stall on store forwarding.
Q8_INLINE __m128i q80_scales8(const uint8_t* p, int cnt) {
  uint64_t h[2] = {0, 0};
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    uint16_t v = 0;
    if (i < cnt) std::memcpy(&v, p + i * int64_t(sizeof(BlockQ8_0)), 2);
    h[i / 4] |= uint64_t(v) << (16 * (i % 4));
  }
  return _mm_set_epi64x(int64_t(h[1]), int64_t(h[0]));
}

// Integer totals of the 8 Q8_0 blocks at w (weight row) × the blocks at xq[r] (activation rows):
// tot[r] lane i = block i's Σ q_j·x_j. Blocks ≥ cnt are zero.
template <bool kVnni, int R>
Q8_INLINE void q80_totals8(const uint8_t* w, const int8_t* const* xq, int cnt, __m256i* tot) {
  constexpr int64_t kBytes = sizeof(BlockQ8_0);
#if defined(__AVX512BW__) && defined(__AVX512VNNI__)
  if (cnt == 8) {
    // Two blocks to a register: 16 int32 lanes, block 2k in 0-7 and 2k + 1 in 8-15.
    const __m512i zero = _mm512_setzero_si512();
    __m512i q[R][4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const uint8_t* blk = w + 2 * k * kBytes + 2;
      const __m512i wv =
          _mm512_inserti64x4(_mm512_castsi256_si512(load(blk)), load(blk + kBytes), 1);
      const __m512i aw = _mm512_abs_epi8(wv);
      const __mmask64 neg = _mm512_movepi8_mask(wv);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512i xv = _mm512_loadu_si512(xq[r] + 64 * k);
        const __m512i p = _mm512_dpbusd_epi32(zero, aw, _mm512_mask_sub_epi8(xv, neg, zero, xv));
        // 128-bit lanes [A0+A1, ·, B0+B1, ·]: each block's 4 partial sums in lanes 0 and 2.
        q[r][k] = _mm512_add_epi32(p, _mm512_shuffle_i32x4(p, p, 0xb1));
      }
    }
    // Blends take 128-bit lanes 1 and 3 from the odd register of each pair, so a holds blocks
    // [0, 2, 1, 3] (one per 128-bit lane) and b blocks [4, 6, 5, 7].
    const __m512i order = _mm512_setr_epi32(0, 8, 4, 12, 1, 9, 5, 13, 0, 0, 0, 0, 0, 0, 0, 0);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512i a = _mm512_mask_blend_epi32(0xf0f0, q[r][0], q[r][1]);
      const __m512i b = _mm512_mask_blend_epi32(0xf0f0, q[r][2], q[r][3]);
      __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
      u = _mm512_add_epi32(u, _mm512_shuffle_epi32(u, _MM_PERM_BADC));
      // lane L holds a's and b's block totals at 4L and 4L + 1
      tot[r] = _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, u));
    }
    return;
  }
#endif
  __m256i p[R][8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    if (i < cnt) {
      const __m256i wv = load(w + i * kBytes + 2);
      const __m256i aw = _mm256_sign_epi8(wv, wv);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) p[r][i] = dot32<kVnni>(aw, wv, load(xq[r] + 32 * i));
    } else {
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) p[r][i] = _mm256_setzero_si256();
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) tot[r] = totals8(p[r]);
}

template <bool kVnni, int R>
Q8_INLINE void q8_0_row(const uint8_t* row, const Q8Rows& x, int64_t r0, float* y, int64_t ldy) {
  constexpr int64_t kBytes = sizeof(BlockQ8_0);
  const int64_t nb = x.k / 32;
  __m256 lane[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) lane[r] = _mm256_setzero_ps();
  for (int64_t b0 = 0; b0 < nb; b0 += 8) {
    const int cnt = int(std::min<int64_t>(8, nb - b0));
    const int8_t* xq[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) xq[r] = x.row_q(r0 + r) + b0 * 32;
    __m256i tot[R];
    q80_totals8<kVnni, R>(row + b0 * kBytes, xq, cnt, tot);
    const __m256 dw = _mm256_cvtph_ps(q80_scales8(row + b0 * kBytes, cnt));
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      alignas(32) float dx[8] = {};
      const float* d = x.row_d(r0 + r) + b0;
      __m256 dxv;
      if (cnt == 8) {
        dxv = _mm256_loadu_ps(d);
      } else {
        std::memcpy(dx, d, size_t(cnt) * 4);
        dxv = _mm256_load_ps(dx);
      }
      const __m256 t = _mm256_mul_ps(_mm256_mul_ps(dw, dxv), _mm256_cvtepi32_ps(tot[r]));
      lane[r] = _mm256_add_ps(lane[r], t);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    const __m128 s4 =
        _mm_add_ps(_mm256_castps256_ps128(lane[r]), _mm256_extractf128_ps(lane[r], 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    y[r * ldy] = _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
  }
}

// ---- driver ----

template <bool kVnni, int R>
Q8_INLINE void one_row(DType t, const uint8_t* row, const Q8Rows& x, int64_t r0, float* y,
                       int64_t ldy) {
  switch (t) {
    case DType::Q4_K:
      return q45k_row<kVnni, false, R>(row, x, r0, y, ldy);
    case DType::Q5_K:
      return q45k_row<kVnni, true, R>(row, x, r0, y, ldy);
    case DType::Q6_K:
      return q6k_row<kVnni, R>(row, x, r0, y, ldy);
    default:
      return q8_0_row<kVnni, R>(row, x, r0, y, ldy);
  }
}

template <bool kVnni>
void rows(const QuantView& w, const Q8Rows& x, float* y, int64_t n0, int64_t n1, float* scratch) {
  // Row blocks whose codes fit about 256 KiB (at most 256 rows: the prefill path's buffer).
  const int64_t block = std::clamp<int64_t>((256 * 1024 / w.k) / 4 * 4, 4, 256);
  for (int64_t rb = 0; rb < x.m; rb += block) {
    const int64_t re = std::min(x.m, rb + block);
    if (re - rb > 4 && w.type == DType::Q8_0 && scratch != nullptr &&
        q80_scratch_bytes(re - rb, w.k) <= kQScratchFloats * int64_t(sizeof(float))) {
      auto* at = reinterpret_cast<uint8_t*>(scratch);
      q80_prefill(w, x, y, n0, n1, rb, re, at + (64 - reinterpret_cast<uintptr_t>(at) % 64) % 64);
      continue;
    }
    if (re - rb > 4 && w.type != DType::Q8_0) {
      if (w.type == DType::Q4_K) krows_prefill<kVnni, 0>(w, x, y, n0, n1, rb, re);
      if (w.type == DType::Q5_K) krows_prefill<kVnni, 1>(w, x, y, n0, n1, rb, re);
      if (w.type == DType::Q6_K) krows_prefill<kVnni, 2>(w, x, y, n0, n1, rb, re);
      continue;
    }
    for (int64_t n = n0; n < n1; ++n) {
      const uint8_t* row = w.data + n * w.row_bytes;
      int64_t r = rb;
      for (; r + 4 <= re; r += 4) one_row<kVnni, 4>(w.type, row, x, r, y + r * w.n + n, w.n);
      switch (re - r) {
        case 3:
          one_row<kVnni, 3>(w.type, row, x, r, y + r * w.n + n, w.n);
          break;
        case 2:
          one_row<kVnni, 2>(w.type, row, x, r, y + r * w.n + n, w.n);
          break;
        case 1:
          one_row<kVnni, 1>(w.type, row, x, r, y + r * w.n + n, w.n);
          break;
        default:
          break;
      }
    }
  }
}

#undef Q8_INLINE

}  // namespace
}  // namespace invar::q8simd
