// AVX-512 delta rule: each state row (Dk floats, 16 per register) is scaled, dotted with k,
// updated and dotted with q in two passes over L1-resident data — the order of delta_rule.cpp.
#include "core/detmath.h"
#include "kernels/kernels_isa.h"
#include "kernels/reduce_simd.h"

namespace invar::kern_avx512 {

using namespace simd512;

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
      for (int64_t j = 0; j < s.dv; ++j) {
        float* row = sh + j * dk;
        __m512 acc = _mm512_setzero_ps();
        for (int64_t i = 0; i < dk; i += 16) {
          const __mmask16 m = tail_mask(dk - i);
          const __m512 r = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, row + i), decay);
          _mm512_mask_storeu_ps(row + i, m, r);
          acc = _mm512_add_ps(acc, _mm512_mul_ps(r, _mm512_maskz_loadu_ps(m, kt + i)));
        }
        const float kv = tree16(acc);
        const __m512 d = _mm512_set1_ps(b * (vt[j] - kv));
        acc = _mm512_setzero_ps();
        for (int64_t i = 0; i < dk; i += 16) {
          const __mmask16 m = tail_mask(dk - i);
          const __m512 r =
              _mm512_fmadd_ps(d, _mm512_maskz_loadu_ps(m, kt + i), _mm512_maskz_loadu_ps(m, row + i));
          _mm512_mask_storeu_ps(row + i, m, r);
          acc = _mm512_add_ps(acc, _mm512_mul_ps(r, _mm512_maskz_loadu_ps(m, qt + i)));
        }
        ot[j] = tree16(acc) * scale;
      }
    }
  }
}

}  // namespace invar::kern_avx512
