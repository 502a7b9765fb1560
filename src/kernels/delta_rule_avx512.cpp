// AVX-512 delta rule: the per-row steps of delta_rule.cpp, 16 lanes wide. Each row's canonical
// dot is one dependent chain of adds, so R rows are processed together to overlap their chains;
// every row still sees exactly its own operation sequence.
#include "core/detmath.h"
#include "kernels/kernels_isa.h"
#include "kernels/reduce_simd.h"

namespace invar::kern_avx512 {

using namespace simd512;

namespace {

// Rows row[0..R) (stride dk) of S_h for one token: scale, dot with k, update, dot with q.
template <int R>
inline void rows_step(float* row, int64_t dk, __m512 decay, const float* kt, const float* qt,
                      const float* vj, float b, float scale, float* oj) {
  __m512 acc[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < dk; i += 16) {
    const __m512 kk = load_tail(kt + i, dk - i);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_mul_ps(load_tail(row + r * dk + i, dk - i), decay);
      store_tail(row + r * dk + i, dk - i, x);
      acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(x, kk));
    }
  }
  __m512 d[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    d[r] = _mm512_set1_ps(b * (vj[r] - tree16(acc[r])));
    acc[r] = _mm512_setzero_ps();
  }
  for (int64_t i = 0; i < dk; i += 16) {
    const __m512 kk = load_tail(kt + i, dk - i);
    const __m512 qq = load_tail(qt + i, dk - i);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_fmadd_ps(d[r], kk, load_tail(row + r * dk + i, dk - i));
      store_tail(row + r * dk + i, dk - i, x);
      acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(x, qq));
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) oj[r] = tree16(acc[r]) * scale;
}

}  // namespace

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
      const __m512 decay = _mm512_set1_ps(det_exp(g[t * s.hv + h]));
      const float b = beta[t * s.hv + h];
      const float* kt = k + (t * s.hk + kh) * dk;
      const float* qt = q + (t * s.hk + kh) * dk;
      const float* vt = v + (t * s.hv + h) * s.dv;
      float* ot = o + (t * s.hv + h) * s.dv;
      int64_t j = 0;
      for (; j + 4 <= s.dv; j += 4)
        rows_step<4>(sh + j * dk, dk, decay, kt, qt, vt + j, b, scale, ot + j);
      for (; j < s.dv; ++j) rows_step<1>(sh + j * dk, dk, decay, kt, qt, vt + j, b, scale, ot + j);
    }
  }
}

}  // namespace invar::kern_avx512
