// Private to the kernels: the delta rule's value heads (kernels_isa.h, delta_rule_heads) written
// once over the 16-float vector type V of rows_simd.h.
//
// Why the bits equal delta_rule.cpp: each row j of S_h runs delta_rule.cpp's four steps with
// the 16 canonical lanes in V (element i → lane i % 16): the decay and the FMA update are per
// element; the two dots are reduce.h's canonical reduction (zero-filled tails add +0, see
// rows_simd.h). R rows go side by side only to overlap their dependent add chains; every row
// still sees exactly its own operation sequence.
#pragma once

#include <cstdint>

#include "core/detmath.h"
#include "kernels/delta_rule.h"

namespace invar::kernels_simd {
namespace {

// Rows row[0..R) (stride dk) of S_h for one token: scale, dot with k, update, dot with q.
template <class V, int R>
inline __attribute__((always_inline)) void delta_rows_step(float* row, int64_t dk, V decay,
                                                           const float* kt, const float* qt,
                                                           const float* vj, float b, float scale,
                                                           float* oj) {
  V acc[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = V::zero();
  for (int64_t i = 0; i < dk; i += 16) {
    const V kk = V::load_n(kt + i, dk - i);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      float* ri = row + r * dk + i;
      const V x = V::mul(V::load_n(ri, dk - i), decay);
      V::store_n(ri, x, dk - i);
      acc[r] = V::add(acc[r], V::mul(x, kk));
    }
  }
  V d[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    d[r] = V::bcast(b * (vj[r] - V::sum(acc[r])));
    acc[r] = V::zero();
  }
  for (int64_t i = 0; i < dk; i += 16) {
    const V kk = V::load_n(kt + i, dk - i);
    const V qq = V::load_n(qt + i, dk - i);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      float* ri = row + r * dk + i;
      const V x = V::fma(d[r], kk, V::load_n(ri, dk - i));
      V::store_n(ri, x, dk - i);
      acc[r] = V::add(acc[r], V::mul(x, qq));
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) oj[r] = V::sum(acc[r]) * scale;
}

template <class V>
void delta_rule_heads(const DeltaRuleShape& s, float* state, const float* q, const float* k,
                      const float* v, const float* g, const float* beta, float* o, int64_t h0,
                      int64_t h1) {
  const float scale = det_rsqrt(float(s.dk));
  const int64_t ratio = s.hv / s.hk;
  const int64_t dk = s.dk;
  for (int64_t h = h0; h < h1; ++h) {
    const int64_t kh = s.tiled ? h % s.hk : h / ratio;
    float* sh = state + h * s.dv * dk;
    for (int64_t t = 0; t < s.n_tokens; ++t) {
      const V decay = V::bcast(det_exp(g[t * s.hv + h]));
      const float b = beta[t * s.hv + h];
      const float* kt = k + (t * s.hk + kh) * dk;
      const float* qt = q + (t * s.hk + kh) * dk;
      const float* vt = v + (t * s.hv + h) * s.dv;
      float* ot = o + (t * s.hv + h) * s.dv;
      int64_t j = 0;
      for (; j + 4 <= s.dv; j += 4)
        delta_rows_step<V, 4>(sh + j * dk, dk, decay, kt, qt, vt + j, b, scale, ot + j);
      for (; j < s.dv; ++j)
        delta_rows_step<V, 1>(sh + j * dk, dk, decay, kt, qt, vt + j, b, scale, ot + j);
    }
  }
}

}  // namespace
}  // namespace invar::kernels_simd
