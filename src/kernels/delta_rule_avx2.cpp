// AVX2 delta rule: the per-row steps of delta_rule.cpp with the 16 canonical lanes in two
// registers (element i → register (i/8) & 1). R rows are processed together to overlap their
// dependent add chains; every row still sees exactly its own operation sequence.
#include "core/detmath.h"
#include "kernels/kernels_isa.h"
#include "kernels/reduce_simd.h"

namespace invar::kern_avx2 {

using namespace simd256;

namespace {

template <int R>
inline void rows_step(float* row, int64_t dk, __m256 decay, const float* kt, const float* qt,
                      const float* vj, float b, float scale, float* oj) {
  __m256 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t i = 0; i < dk; i += 8) {
    const int64_t half = (i / 8) & 1;
    const __m256 kk = load_tail(kt + i, dk - i);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 x = _mm256_mul_ps(load_tail(row + r * dk + i, dk - i), decay);
      store_tail(row + r * dk + i, dk - i, x);
      const __m256 p = _mm256_mul_ps(x, kk);
      if (half)
        acc[r][1] = _mm256_add_ps(acc[r][1], p);
      else
        acc[r][0] = _mm256_add_ps(acc[r][0], p);
    }
  }
  __m256 d[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    d[r] = _mm256_set1_ps(b * (vj[r] - tree16(acc[r][0], acc[r][1])));
    acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < dk; i += 8) {
    const int64_t half = (i / 8) & 1;
    const __m256 kk = load_tail(kt + i, dk - i);
    const __m256 qq = load_tail(qt + i, dk - i);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 x = _mm256_fmadd_ps(d[r], kk, load_tail(row + r * dk + i, dk - i));
      store_tail(row + r * dk + i, dk - i, x);
      const __m256 p = _mm256_mul_ps(x, qq);
      if (half)
        acc[r][1] = _mm256_add_ps(acc[r][1], p);
      else
        acc[r][0] = _mm256_add_ps(acc[r][0], p);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) oj[r] = tree16(acc[r][0], acc[r][1]) * scale;
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
      const __m256 decay = _mm256_set1_ps(det_exp(g[t * s.hv + h]));
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

}  // namespace invar::kern_avx2
