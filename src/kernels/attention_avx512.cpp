// AVX-512 attention: the operation sequence of attention.cpp for each query head, with the K and
// V row loads shared by a tile of query heads of the same KV group (kernels_isa.h).
#include <algorithm>

#include "kernels/kernels_isa.h"
#include "kernels/reduce_simd.h"

namespace invar::kern_avx512 {

using namespace simd512;

namespace {

constexpr int64_t kTile = kAttnHeadTile;
constexpr int64_t kVChunks = 2;  // 32 output lanes per pass over V: kTile·2 accumulators
constexpr int64_t kPBlock = 32;  // V rows per block (32 KiB at D = 256)

}  // namespace

void attention_units(const AttentionShape& s, const KvView& kv, const float* q, float* o,
                     int64_t u0, int64_t u1, float* scores) {
  const int64_t dd = s.d;
  for (int64_t u = u0; u < u1; ++u) {
    const auto [t, g, h0, nh, n] = attention_unit(s, u);
    // Heads past nh reuse head 0's query; their results are never stored.
    const float* qh[kTile];
    for (int64_t j = 0; j < kTile; ++j) qh[j] = q + (t * s.h + h0 + (j < nh ? j : 0)) * dd;

    // score[j][p] = canonical dot(q_j, K[p]) · scale
    for (int64_t p = 0; p < n; ++p) {
      const float* kr = attention_kv_row(kv.k_blocks, kv, p, g * dd);
      __m512 acc[kTile];
#pragma GCC unroll 16
      for (int64_t j = 0; j < kTile; ++j) acc[j] = _mm512_setzero_ps();
      // Plain loads for whole chunks (masked loads defeat the prefetcher on long K sweeps).
      int64_t c = 0;
      for (; c + 16 <= dd; c += 16) {
        const __m512 kc = _mm512_loadu_ps(kr + c);
#pragma GCC unroll 16
        for (int64_t j = 0; j < kTile; ++j)
          acc[j] = _mm512_add_ps(acc[j], _mm512_mul_ps(_mm512_loadu_ps(qh[j] + c), kc));
      }
      if (c < dd) {
        const __mmask16 m = tail_mask(dd - c);
        const __m512 kc = _mm512_maskz_loadu_ps(m, kr + c);
#pragma GCC unroll 16
        for (int64_t j = 0; j < kTile; ++j)
          acc[j] = _mm512_add_ps(acc[j], _mm512_mul_ps(_mm512_maskz_loadu_ps(m, qh[j] + c), kc));
      }
#pragma GCC unroll 16
      for (int64_t j = 0; j < kTile; ++j) scores[j * n + p] = tree16(acc[j]) * s.scale;
    }
    float* accbuf = scores + kTile * n;  // [kTile][D]
    float sum[kTile];
    for (int64_t j = 0; j < nh; ++j) {
      float* sc = scores + j * n;
      float mx = -__builtin_inff();
      for (int64_t p = 0; p < n; ++p)
        if (sc[p] > mx) mx = sc[p];
      sum[j] = exp_sub_sum(sc, n, mx, sc);
    }
    // o_j[d] = (fma chain over p of e_j[p]·V[p][d]) / sum_j. Positions go in blocks of kPBlock
    // rows (L1-resident) and 32 lanes of d per pass; the accumulators are parked in `accbuf`
    // between blocks, which leaves each lane's chain over p unchanged.
    for (int64_t pb = 0; pb < n; pb += kPBlock) {
      const int64_t pe = std::min(n, pb + kPBlock);
      for (int64_t c0 = 0; c0 < dd; c0 += 16 * kVChunks) {
        __m512 acc[kTile][kVChunks];
        __mmask16 m[kVChunks];
#pragma GCC unroll 16
        for (int64_t c = 0; c < kVChunks; ++c) {
          m[c] = c0 + 16 * c < dd ? tail_mask(dd - c0 - 16 * c) : __mmask16(0);
#pragma GCC unroll 16
          for (int64_t j = 0; j < kTile; ++j)
            acc[j][c] = pb == 0 ? _mm512_setzero_ps()
                                : _mm512_maskz_loadu_ps(m[c], accbuf + j * dd + c0 + 16 * c);
        }
        for (int64_t p = pb; p < pe; ++p) {
          const float* vr = attention_kv_row(kv.v_blocks, kv, p, g * dd + c0);
          __m512 vc[kVChunks];
#pragma GCC unroll 16
          for (int64_t c = 0; c < kVChunks; ++c)
            vc[c] = m[c] == 0xffff ? _mm512_loadu_ps(vr + 16 * c)
                                   : _mm512_maskz_loadu_ps(m[c], vr + 16 * c);
#pragma GCC unroll 16
          for (int64_t j = 0; j < kTile; ++j) {
            const __m512 e = _mm512_set1_ps(scores[j * n + p]);
#pragma GCC unroll 16
            for (int64_t c = 0; c < kVChunks; ++c) acc[j][c] = _mm512_fmadd_ps(e, vc[c], acc[j][c]);
          }
        }
#pragma GCC unroll 16
        for (int64_t j = 0; j < kTile; ++j)
#pragma GCC unroll 16
          for (int64_t c = 0; c < kVChunks; ++c)
            _mm512_mask_storeu_ps(accbuf + j * dd + c0 + 16 * c, m[c], acc[j][c]);
      }
    }
    for (int64_t j = 0; j < nh; ++j) {
      float* ov = o + (t * s.h + h0 + j) * dd;
      const __m512 sv = _mm512_set1_ps(sum[j]);
      for (int64_t c = 0; c < dd; c += 16) {
        const __mmask16 m = tail_mask(dd - c);
        _mm512_mask_storeu_ps(ov + c, m,
                              _mm512_div_ps(_mm512_maskz_loadu_ps(m, accbuf + j * dd + c), sv));
      }
    }
  }
}

}  // namespace invar::kern_avx512
