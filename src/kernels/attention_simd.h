// Private to the kernels: the attention work units (kernels_isa.h, attention_units) written once
// over the 16-float vector type V of rows_simd.h; the weighted V sum runs over V::Narrow (as
// wide as the registers allow: 8 lanes on AVX2, 16 on AVX-512), V::kAttnVChunks vectors a pass.
//
// Why the bits equal attention.cpp, for each query head of a tile:
// - score[p] is reduce.h's canonical dot of q and K[p] (element i → lane i % 16, V::sum's tree;
//   the tail is zero-filled), times the scale;
// - max, then exp_sub_sum (rows_simd.h): det_exp per element and the canonical Σ;
// - o[d] is one FMA chain over p = 0..n−1 in order from +0, one lane per d, whatever the width
//   of the pass. Positions go in blocks of kPBlock rows (L1-resident) and the accumulators are
//   parked in `accbuf` between blocks, which stores and reloads the same float;
// - o[d] / sum per element.
// Heads of a tile only share the loads of K and V rows.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/kernels_isa.h"
#include "kernels/rows_simd.h"

namespace invar::kernels_simd {
namespace {

// The units [u0, u1), all of whose tiles hold at most kTile heads: a tile computes kTile heads'
// scores and sums (registers), so a tile narrower than kAttnHeadTile (a KV group of fewer heads:
// multi-head attention has groups of 1) is run by the instantiation of its width instead of
// computing kAttnHeadTile heads and storing nh.
template <class V, int64_t kTile>
void attention_units_tile(const AttentionShape& s, const KvView& kv, const float* q, float* o,
                          int64_t u0, int64_t u1, float* scores) {
  using N = typename V::Narrow;
  constexpr int64_t kC = V::kAttnVChunks, kW = N::kLanes;
  constexpr int64_t kPBlock = 32;  // V rows per block (32 KiB at D = 256)
  const int64_t dd = s.d;
  for (int64_t u = u0; u < u1; ++u) {
    const auto [t, g, h0, nh, n] = attention_unit(s, u);
    // Heads past nh reuse head 0's query; their results are never stored.
    const float* qh[kTile];
    for (int64_t j = 0; j < kTile; ++j) qh[j] = q + (t * s.h + h0 + (j < nh ? j : 0)) * dd;

    // score[j][p] = canonical dot(q_j, K[p]) · scale
    for (int64_t p = 0; p < n; ++p) {
      const float* kr = attention_kv_row(kv.k_blocks, kv, p, g * dd);
      V acc[kTile];
#pragma GCC unroll 16
      for (int64_t j = 0; j < kTile; ++j) acc[j] = V::zero();
      // Plain loads for whole chunks (masked loads defeat the prefetcher on long K sweeps).
      int64_t c = 0;
      for (; c + 16 <= dd; c += 16) {
        const V kc = V::load(kr + c);
#pragma GCC unroll 16
        for (int64_t j = 0; j < kTile; ++j) acc[j] = V::add(acc[j], V::mul(V::load(qh[j] + c), kc));
      }
      if (c < dd) {
        const V kc = V::load_n(kr + c, dd - c);
#pragma GCC unroll 16
        for (int64_t j = 0; j < kTile; ++j)
          acc[j] = V::add(acc[j], V::mul(V::load_n(qh[j] + c, dd - c), kc));
      }
#pragma GCC unroll 16
      for (int64_t j = 0; j < kTile; ++j) scores[j * n + p] = V::sum(acc[j]) * s.scale;
    }
    float* accbuf = scores + kTile * n;  // [kTile][D]
    float sum[kTile];
    for (int64_t j = 0; j < nh; ++j) {
      float* sc = scores + j * n;
      float mx = -__builtin_inff();
      for (int64_t p = 0; p < n; ++p)
        if (sc[p] > mx) mx = sc[p];
      sum[j] = exp_sub_sum<V>(sc, n, mx, sc);
    }
    // o_j[d] = (fma chain over p of e_j[p]·V[p][d]) / sum_j, kC·kW lanes of d per pass.
    for (int64_t pb = 0; pb < n; pb += kPBlock) {
      const int64_t pe = std::min(n, pb + kPBlock);
      for (int64_t c0 = 0; c0 < dd; c0 += kC * kW) {
        N acc[kTile][kC];
        int64_t rem[kC];  // valid lanes of chunk c (≤ 0: none)
#pragma GCC unroll 16
        for (int64_t c = 0; c < kC; ++c) {
          rem[c] = dd - c0 - kW * c;
#pragma GCC unroll 16
          for (int64_t j = 0; j < kTile; ++j)
            acc[j][c] = pb == 0 ? N::zero() : N::load_n(accbuf + j * dd + c0 + kW * c, rem[c]);
        }
        for (int64_t p = pb; p < pe; ++p) {
          const float* vr = attention_kv_row(kv.v_blocks, kv, p, g * dd + c0);
          N vc[kC];
#pragma GCC unroll 16
          for (int64_t c = 0; c < kC; ++c) vc[c] = N::load_n(vr + kW * c, rem[c]);
#pragma GCC unroll 16
          for (int64_t j = 0; j < kTile; ++j) {
            const N e = N::bcast(scores[j * n + p]);
#pragma GCC unroll 16
            for (int64_t c = 0; c < kC; ++c) acc[j][c] = N::fma(e, vc[c], acc[j][c]);
          }
        }
#pragma GCC unroll 16
        for (int64_t j = 0; j < kTile; ++j)
#pragma GCC unroll 16
          for (int64_t c = 0; c < kC; ++c)
            N::store_n(accbuf + j * dd + c0 + kW * c, acc[j][c], rem[c]);
      }
    }
    for (int64_t j = 0; j < nh; ++j) {
      float* ov = o + (t * s.h + h0 + j) * dd;
      const V sv = V::bcast(sum[j]);
      lanes_map<V>(ov, dd, [&](int64_t i, int64_t r) {
        return V::div(V::load_n(accbuf + j * dd + i, r), sv);
      });
    }
  }
}

template <class V>
void attention_units(const AttentionShape& s, const KvView& kv, const float* q, float* o,
                     int64_t u0, int64_t u1, float* scores) {
  static_assert(kAttnHeadTile == 8, "the tile widths below are 1, 2, 4 and kAttnHeadTile");
  for (int64_t u = u0; u < u1; ++u) {
    const int64_t nh = attention_unit(s, u).nh;
    if (nh <= 1)
      attention_units_tile<V, 1>(s, kv, q, o, u, u + 1, scores);
    else if (nh <= 2)
      attention_units_tile<V, 2>(s, kv, q, o, u, u + 1, scores);
    else if (nh <= 4)
      attention_units_tile<V, 4>(s, kv, q, o, u, u + 1, scores);
    else
      attention_units_tile<V, kAttnHeadTile>(s, kv, q, o, u, u + 1, scores);
  }
}

}  // namespace
}  // namespace invar::kernels_simd
