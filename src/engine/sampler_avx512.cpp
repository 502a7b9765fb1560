// AVX-512 copy of sampler.cpp's weight_of over the ranked head (sampler_isa.h).
#include "core/detmath.h"
#include "core/detmath_simd.h"
#include "engine/sampler_isa.h"

namespace invar {

void ranked_weights_avx512(const float* logits, const int32_t* ids, int64_t m, float best, float T,
                           float* w) {
  const __m512 vbest = _mm512_set1_ps(best), vt = _mm512_set1_ps(T);
  int64_t i = 0;
  for (; i + 16 <= m; i += 16) {
    const __m512i idx = _mm512_loadu_si512(ids + i);
    const __m512 l = _mm512_i32gather_ps(idx, logits, 4);
    const __m512 y = simd512::exp_ps(_mm512_div_ps(_mm512_sub_ps(l, vbest), vt));
    _mm512_storeu_ps(w + i, _mm512_max_ps(y, _mm512_setzero_ps()));  // NaN → 0: max's 2nd operand
  }
  for (; i < m; ++i) {
    const float y = det_exp((logits[ids[i]] - best) / T);
    w[i] = y >= 0.0f ? y : 0.0f;
  }
}

}  // namespace invar
