// AVX2 delta rule: as delta_rule_avx512.cpp with the 16 canonical lanes in two registers.
#include "core/detmath.h"
#include "kernels/kernels_isa.h"
#include "kernels/reduce_simd.h"

namespace invar::kern_avx2 {

using namespace simd256;

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
      for (int64_t j = 0; j < s.dv; ++j) {
        float* row = sh + j * dk;
        // acc[0] holds canonical lanes 0..7, acc[1] lanes 8..15: element i → acc[(i/8)&1].
        __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int64_t i = 0; i < dk; i += 8) {
          const __m256 r = _mm256_mul_ps(load_tail(row + i, dk - i), decay);
          store_tail(row + i, dk - i, r);
          acc[(i / 8) & 1] =
              _mm256_add_ps(acc[(i / 8) & 1], _mm256_mul_ps(r, load_tail(kt + i, dk - i)));
        }
        const float kv = tree16(acc[0], acc[1]);
        const __m256 d = _mm256_set1_ps(b * (vt[j] - kv));
        acc[0] = acc[1] = _mm256_setzero_ps();
        for (int64_t i = 0; i < dk; i += 8) {
          const __m256 r = _mm256_fmadd_ps(d, load_tail(kt + i, dk - i), load_tail(row + i, dk - i));
          store_tail(row + i, dk - i, r);
          acc[(i / 8) & 1] =
              _mm256_add_ps(acc[(i / 8) & 1], _mm256_mul_ps(r, load_tail(qt + i, dk - i)));
        }
        ot[j] = tree16(acc[0], acc[1]) * scale;
      }
    }
  }
}

}  // namespace invar::kern_avx2
