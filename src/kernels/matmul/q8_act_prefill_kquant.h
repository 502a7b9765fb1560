// Private to q8_act_simd.h: the q8 profile's Q4_K, Q5_K and Q6_K products for more than 4
// activation rows, bit for bit q45k_ref / q6k_ref (q8_act.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/detmath_simd.h"  // <immintrin.h>, with GCC bug 105593 silenced
#include "kernels/matmul/q8_act.h"
#include "kernels/matmul/q8_act_simd_base.h"
#include "quant/blocks.h"

namespace invar::q8simd {
namespace {

// ---- prefill: K-quants ----
//
// For many activation rows each superblock of P weight rows is decoded once per row block into
// codes (kQ4..6: 8 vectors of 32 unsigned codes) and int16 scale vectors, then runs over every
// group of up to 8 / P activation rows (R × P integer accumulators); each superblock's float step
// is done for the R × P outputs at once in 8 lanes, lane r·P + p, the same IEEE operations as the
// reference's on each lane, into per-output float accumulators that live in a small buffer
// across superblocks.

// Superblock b of one weight row, decoded: codes, scale vectors, d, dmin, mins.
struct KPanel {
  alignas(64) uint8_t codes[8][32];   // vector v: weights 32v .. 32v + 31, unsigned
  alignas(64) int16_t scales[8][16];  // the int16 scale of each weight's sub-block, per vector
  __m128i mins;                       // Q4_K/Q5_K: the 8 mins, int16
  __m256i sc16;                       // Q6_K: the 16 scales, int16
  float d, dmin;
};

template <int kKind>  // 0 Q4_K, 1 Q5_K, 2 Q6_K
Q8_INLINE void kpanel_fill(const uint8_t* blk, KPanel& o) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  if constexpr (kKind == 2) {
    const auto* q6 = reinterpret_cast<const BlockQ6_K*>(blk);
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q6->scales));
    o.sc16 = _mm256_cvtepi8_epi16(sc8);
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; ++h) {
      const __m256i a = load(q6->ql + 64 * h), bq = load(q6->ql + 64 * h + 32);
      const __m256i hb = load(q6->qh + 32 * h);
      const __m256i u[4] = {
          _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_slli_epi16(_mm256_and_si256(hb, m3), 4)),
          _mm256_or_si256(_mm256_and_si256(bq, m4),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m3), 4)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m3), 4)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bq, 4), m4),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m3), 4))};
      for (int g = 0; g < 4; ++g) {
        const int s = 8 * h + 2 * g;
        _mm256_store_si256(reinterpret_cast<__m256i*>(o.codes[4 * h + g]), u[g]);
        const __m128i pick =
            _mm_setr_epi8(char(s), char(s), char(s), char(s), char(s), char(s), char(s), char(s),
                          char(s + 1), char(s + 1), char(s + 1), char(s + 1), char(s + 1),
                          char(s + 1), char(s + 1), char(s + 1));
        _mm256_store_si256(reinterpret_cast<__m256i*>(o.scales[4 * h + g]),
                           _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, pick)));
      }
    }
    uint16_t dh;
    std::memcpy(&dh, &q6->d, 2);
    o.d = _cvtsh_ss(dh);
    o.dmin = 0.0f;
    return;
  } else {
    const __m256i sm16 = k4_scales_mins(blk);
    o.mins = _mm256_extracti128_si256(sm16, 1);
    const __m256i sc2 = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sm16));
    const uint8_t* qs = blk + (kKind == 1 ? 48 : 16);
    __m256i hbits = _mm256_setzero_si256();
    if constexpr (kKind == 1) hbits = load(blk + 16);
    const __m256i one8 = _mm256_set1_epi8(1);
    for (int j = 0; j < 4; ++j) {
      const __m256i qv = load(qs + 32 * j);
      __m256i lo = _mm256_and_si256(qv, m4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qv, 4), m4);
      if constexpr (kKind == 1) {
        lo = _mm256_or_si256(
            lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j), one8), 4));
        hi = _mm256_or_si256(
            hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j + 1), one8), 4));
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(o.codes[2 * j]), lo);
      _mm256_store_si256(reinterpret_cast<__m256i*>(o.codes[2 * j + 1]), hi);
      _mm256_store_si256(
          reinterpret_cast<__m256i*>(o.scales[2 * j]),
          _mm256_shuffle_epi8(sc2, _mm256_set1_epi16(int16_t((4 * j + 1) << 8 | 4 * j))));
      _mm256_store_si256(
          reinterpret_cast<__m256i*>(o.scales[2 * j + 1]),
          _mm256_shuffle_epi8(sc2, _mm256_set1_epi16(int16_t((4 * j + 3) << 8 | (4 * j + 2)))));
    }
    o.d = f16_at(blk);
    o.dmin = f16_at(blk + 2);
  }
}

// Totals of up to 4 int32 xmm vectors (missing ones zero), in order.
Q8_INLINE __m128i totals4(__m128i a, __m128i b, __m128i c, __m128i d) {
  return _mm_hadd_epi32(_mm_hadd_epi32(a, b), _mm_hadd_epi32(c, d));
}

// What a full tile's float step takes from its P panels, lane r·P + p (the same for every group
// of rows: built once per superblock, not once per tile).
struct KTileConst {
  __m256 d, dmin;   // the panel's d and dmin in each lane
  __m256i mins[2];  // Q4_K/Q5_K: [mins of panel 2q | mins of panel 2q + 1]
};
template <int P>
Q8_INLINE KTileConst ktile_const(const KPanel* pan) {
  KTileConst c;
  c.d = _mm256_setr_ps(pan[0 % P].d, pan[1 % P].d, pan[2 % P].d, pan[3 % P].d, pan[4 % P].d,
                       pan[5 % P].d, pan[6 % P].d, pan[7 % P].d);
  c.dmin = _mm256_setr_ps(pan[0 % P].dmin, pan[1 % P].dmin, pan[2 % P].dmin, pan[3 % P].dmin,
                          pan[4 % P].dmin, pan[5 % P].dmin, pan[6 % P].dmin, pan[7 % P].dmin);
#pragma GCC unroll 2
  for (int q = 0; q < 2; ++q)
    c.mins[q] = 2 * q + 1 < P ? _mm256_set_m128i(pan[2 * q + 1].mins, pan[2 * q].mins)
                              : _mm256_setzero_si256();
  return c;
}

// Superblock b of P panels × activation rows r0 .. r0 + R − 1: facc[(r − rb)·P + p] += t.
template <bool kVnni, int kKind, int R, int P>
Q8_INLINE void ktile(const KPanel* pan, const KTileConst& kc, const Q8Rows& x, int64_t b,
                     int64_t r0, float* facc) {
  static_assert(R * P <= 8);
  __m256i a[R][P];
#if defined(__AVX512BW__) && defined(__AVX512VNNI__)
  // AVX-512: two vectors of codes (64 weights) per instruction; the halves' sums are added at
  // the end (integers: exact).
  __m512i z[R][P];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) z[r][p] = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int v = 0; v < 8; v += 2) {
    __m512i w[P], s[P];
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      w[p] = _mm512_load_si512(pan[p].codes[v]);
      s[p] = _mm512_load_si512(pan[p].scales[v]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512i xv = _mm512_loadu_si512(x.row_q(r0 + r) + b * 256 + 32 * v);
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p)
        z[r][p] = _mm512_dpwssd_epi32(z[r][p], _mm512_maddubs_epi16(w[p], xv), s[p]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      a[r][p] =
          _mm256_add_epi32(_mm512_castsi512_si256(z[r][p]), _mm512_extracti64x4_epi64(z[r][p], 1));
    }
  }
#else
  // The step loop below runs two steps per iteration: GCC then keeps the 8 accumulators in place
  // with fewer register moves at the back edge (measured: Q4_K 4 × 2 tile +6-10% against one
  // step, Q6_K +3-5%; all 8 unrolled spills them, -8%).
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) a[r][p] = _mm256_setzero_si256();
#pragma GCC unroll 2
  for (int v = 0; v < 8; ++v) {
    __m256i w[P], s[P];
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      w[p] = load(pan[p].codes[v]);
      s[p] = load(pan[p].scales[v]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256i xv = load(x.row_q(r0 + r) + b * 256 + 32 * v);
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p)
        a[r][p] = madd_acc<kVnni>(a[r][p], _mm256_maddubs_epi16(w[p], xv), s[p]);
    }
  }
#endif
  if constexpr (kKind == 2) {
    // − 32 · Σ_s sc_s · (x-sum of group s): the codes' offset.
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        const __m256i c = _mm256_madd_epi16(pan[p].sc16, load(x.row_sums(r0 + r) + 16 * b));
        a[r][p] = _mm256_sub_epi32(a[r][p], _mm256_slli_epi32(c, 5));
      }
  }
  // The float step for lane r·P + p.
  if constexpr (R * P == 8 && P % 2 == 0) {
    // A full tile (4 × 2 or 2 × 4): lanes (r, p) = r·P + p, built with vector operations.
    __m256i all[8];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) all[r * P + p] = a[r][p];
    const __m256 is = _mm256_cvtepi32_ps(totals8(all));
    const __m128 dx4 =
        _mm_setr_ps(x.row_d(r0)[b], x.row_d(r0 + 1)[b], R > 2 ? x.row_d(r0 + 2)[b] : 0.0f,
                    R > 3 ? x.row_d(r0 + 3)[b] : 0.0f);
    const __m256 dxv = _mm256_permutevar8x32_ps(
        _mm256_castps128_ps256(dx4),
        _mm256_setr_epi32(0 / P, 1 / P, 2 / P, 3 / P, 4 / P, 5 / P, 6 / P, 7 / P));
    __m256 t = _mm256_mul_ps(_mm256_mul_ps(kc.d, dxv), is);
    if constexpr (kKind != 2) {
      // im of (r, p): v[r·P/2 + q] = [mins_2q | mins_2q+1] · [sub_r | sub_r]; the two hadd
      // levels leave (r, 2q) in the low half and (r, 2q + 1) in the high half, in the order
      // the permutation puts into lanes r·P + p.
      __m256i v[4];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256i sub = _mm256_broadcastsi128_si256(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.row_sums32(r0 + r) + 8 * b)));
#pragma GCC unroll 2
        for (int q = 0; q < P / 2; ++q) v[r * (P / 2) + q] = _mm256_madd_epi16(kc.mins[q], sub);
      }
      const __m256i h =
          _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
      const __m256i im = _mm256_permutevar8x32_epi32(h, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      t = _mm256_fnmadd_ps(_mm256_mul_ps(kc.dmin, dxv), _mm256_cvtepi32_ps(im), t);
    }
    _mm256_storeu_ps(facc, _mm256_add_ps(_mm256_loadu_ps(facc), t));
    return;
  }
  __m256i all[8];
  alignas(32) float dv[8] = {}, dmv[8] = {}, dxv[8] = {};
  __m128i im4[8];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    const float dx = x.row_d(r0 + r)[b];
    __m128i sub = _mm_setzero_si128();
    if constexpr (kKind != 2)
      sub = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.row_sums32(r0 + r) + 8 * b));
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      all[r * P + p] = a[r][p];
      dv[r * P + p] = pan[p].d;
      dmv[r * P + p] = pan[p].dmin;
      dxv[r * P + p] = dx;
      if constexpr (kKind != 2) im4[r * P + p] = _mm_madd_epi16(pan[p].mins, sub);
    }
  }
#pragma GCC unroll 8
  for (int i = R * P; i < 8; ++i) {
    all[i] = _mm256_setzero_si256();
    im4[i] = _mm_setzero_si128();
  }
  const __m256 is = _mm256_cvtepi32_ps(totals8(all));
  const __m256 dd = _mm256_mul_ps(_mm256_load_ps(dv), _mm256_load_ps(dxv));
  __m256 t = _mm256_mul_ps(dd, is);
  if constexpr (kKind != 2) {
    const __m256i im = _mm256_set_m128i(totals4(im4[4], im4[5], im4[6], im4[7]),
                                        totals4(im4[0], im4[1], im4[2], im4[3]));
    const __m256 dm = _mm256_mul_ps(_mm256_load_ps(dmv), _mm256_load_ps(dxv));
    t = _mm256_fnmadd_ps(dm, _mm256_cvtepi32_ps(im), t);
  }
  _mm256_storeu_ps(facc, _mm256_add_ps(_mm256_loadu_ps(facc), t));
}

// Superblock b of P panels × activation rows [rb, re): tiles of 8 / P rows (at most 4), then the
// rows left one by one (fewer than a tile: at most 3 per row block).
template <bool kVnni, int kKind, int P>
Q8_INLINE void ktiles(const KPanel* pan, const Q8Rows& x, int64_t b, int64_t rb, int64_t re,
                      float* facc) {
  constexpr int R = std::min(4, 8 / P);
  const KTileConst kc = ktile_const<P>(pan);
  int64_t r = rb;
  for (; r + R <= re; r += R) ktile<kVnni, kKind, R, P>(pan, kc, x, b, r, facc + (r - rb) * P);
  for (; r < re; ++r) ktile<kVnni, kKind, 1, P>(pan, kc, x, b, r, facc + (r - rb) * P);
}

// Weight rows per tile: AVX-512 4 (2 activation rows × 4: the activations stream from L2 once
// per 4 weight rows, as for Q8_0), AVX2 2 (4 × 2: its 16 registers).
#if defined(__AVX512BW__) && defined(__AVX512VNNI__)
constexpr int kKTileCols = 4;
#else
constexpr int kKTileCols = 2;
#endif

// Outputs [n0, n1) × activation rows [rb, re) of a K-quant matrix, kKTileCols weight rows at a
// time.
template <bool kVnni, int kKind>
void krows_prefill(const QuantView& w, const Q8Rows& x, float* y, int64_t n0, int64_t n1,
                   int64_t rb, int64_t re) {
  constexpr int64_t kBytes = kKind == 0   ? sizeof(BlockQ4_K)
                             : kKind == 1 ? sizeof(BlockQ5_K)
                                          : sizeof(BlockQ6_K);
  constexpr int64_t kMaxRows = 256;
  alignas(32) float facc[kMaxRows * kKTileCols + 8];
  // kStage outputs of every row gathered before they go to y: a row of y is then written as one
  // 64-byte line, not 8 times in pieces of kKTileCols floats. (y's rows are N floats apart,
  // often a multiple of 4 KiB: all of them fall into one L1 set, and the pieces missed L1 each
  // time, a fifth of the tile's time at K = 512.)
  constexpr int64_t kStage = 16;
  alignas(64) float stage[kMaxRows * kStage];
  KPanel pan[kKTileCols];
  for (int64_t ns = n0; ns < n1; ns += kStage) {
    const int64_t ne = std::min(n1, ns + kStage), sw = ne - ns;
    for (int64_t n = ns; n < ne; n += kKTileCols) {
      const int np = int(std::min<int64_t>(kKTileCols, ne - n));
      std::fill(facc, facc + (re - rb) * np + 8, 0.0f);
      for (int64_t b = 0; b < x.k / 256; ++b) {
        for (int p = 0; p < np; ++p)
          kpanel_fill<kKind>(w.data + (n + p) * w.row_bytes + b * kBytes, pan[p]);
        if (np == kKTileCols) ktiles<kVnni, kKind, kKTileCols>(pan, x, b, rb, re, facc);
        if constexpr (kKTileCols > 3)
          if (np == 3) ktiles<kVnni, kKind, 3>(pan, x, b, rb, re, facc);
        if constexpr (kKTileCols > 2)
          if (np == 2) ktiles<kVnni, kKind, 2>(pan, x, b, rb, re, facc);
        if (np == 1) ktiles<kVnni, kKind, 1>(pan, x, b, rb, re, facc);
      }
      for (int64_t r = 0; r < re - rb; ++r)
        for (int p = 0; p < np; ++p) stage[r * sw + (n - ns) + p] = facc[r * np + p];
    }
    for (int64_t r = rb; r < re; ++r)
      std::memcpy(y + r * w.n + ns, stage + (r - rb) * sw, size_t(sw) * sizeof(float));
  }
}

}  // namespace
}  // namespace invar::q8simd
