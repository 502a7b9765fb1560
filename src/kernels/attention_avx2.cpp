// AVX2 attention: the operation sequence of attention.cpp for each query head, with the K and V
// row loads shared by a tile of query heads of the same KV group (kernels_isa.h). The canonical
// dot keeps lanes 0..7 and 8..15 in two registers per head.
#include <algorithm>

#include "kernels/kernels_isa.h"
#include "kernels/reduce_simd.h"

namespace invar::kern_avx2 {

using namespace simd256;

namespace {

constexpr int64_t kTile = kAttnHeadTile;
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
      __m256 acc[kTile][2];
#pragma GCC unroll 16
      for (int64_t j = 0; j < kTile; ++j) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
      int64_t c = 0;
      for (; c + 16 <= dd; c += 16) {
        const __m256 k0 = _mm256_loadu_ps(kr + c), k1 = _mm256_loadu_ps(kr + c + 8);
#pragma GCC unroll 16
        for (int64_t j = 0; j < kTile; ++j) {
          acc[j][0] = _mm256_add_ps(acc[j][0], _mm256_mul_ps(_mm256_loadu_ps(qh[j] + c), k0));
          acc[j][1] = _mm256_add_ps(acc[j][1], _mm256_mul_ps(_mm256_loadu_ps(qh[j] + c + 8), k1));
        }
      }
      if (c < dd) {
        const int64_t r = dd - c;
        const __m256 k0 = load_tail(kr + c, r), k1 = load_tail(kr + c + 8, r - 8);
#pragma GCC unroll 16
        for (int64_t j = 0; j < kTile; ++j) {
          acc[j][0] = _mm256_add_ps(acc[j][0], _mm256_mul_ps(load_tail(qh[j] + c, r), k0));
          acc[j][1] = _mm256_add_ps(acc[j][1], _mm256_mul_ps(load_tail(qh[j] + c + 8, r - 8), k1));
        }
      }
#pragma GCC unroll 16
      for (int64_t j = 0; j < kTile; ++j)
        scores[j * n + p] = tree16(acc[j][0], acc[j][1]) * s.scale;
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
    // rows (L1-resident) and 8 lanes of d per pass; the accumulators are parked in `accbuf`
    // between blocks, which leaves each lane's chain over p unchanged.
    for (int64_t pb = 0; pb < n; pb += kPBlock) {
      const int64_t pe = std::min(n, pb + kPBlock);
      for (int64_t c0 = 0; c0 < dd; c0 += 8) {
        const int64_t rem = dd - c0;
        __m256 acc[kTile];
#pragma GCC unroll 16
        for (int64_t j = 0; j < kTile; ++j)
          acc[j] = pb == 0 ? _mm256_setzero_ps() : load_tail(accbuf + j * dd + c0, rem);
        for (int64_t p = pb; p < pe; ++p) {
          const float* vr = attention_kv_row(kv.v_blocks, kv, p, g * dd + c0);
          const __m256 vc = rem >= 8 ? _mm256_loadu_ps(vr) : load_tail(vr, rem);
#pragma GCC unroll 16
          for (int64_t j = 0; j < kTile; ++j)
            acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(scores[j * n + p]), vc, acc[j]);
        }
#pragma GCC unroll 16
        for (int64_t j = 0; j < kTile; ++j) store_tail(accbuf + j * dd + c0, rem, acc[j]);
      }
    }
    for (int64_t j = 0; j < nh; ++j) {
      float* ov = o + (t * s.h + h0 + j) * dd;
      const __m256 sv = _mm256_set1_ps(sum[j]);
      for (int64_t c = 0; c < dd; c += 8)
        store_tail(ov + c, dd - c, _mm256_div_ps(load_tail(accbuf + j * dd + c, dd - c), sv));
    }
  }
}

}  // namespace invar::kern_avx2
