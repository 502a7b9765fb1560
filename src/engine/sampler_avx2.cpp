// AVX2 copy of sampler.cpp's weight_of over the ranked head (sampler_isa.h).
#include "core/detmath.h"
#include "core/detmath_simd.h"
#include "engine/sampler_isa.h"

namespace invar {

void ranked_weights_avx2(const float* logits, const int32_t* ids, int64_t m, float best, float T,
                         float* w) {
  const __m256 vbest = _mm256_set1_ps(best), vt = _mm256_set1_ps(T);
  int64_t i = 0;
  for (; i + 8 <= m; i += 8) {
    const __m256i idx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ids + i));
    const __m256 l = _mm256_i32gather_ps(logits, idx, 4);
    const __m256 y = simd256::exp_ps(_mm256_div_ps(_mm256_sub_ps(l, vbest), vt));
    _mm256_storeu_ps(w + i, _mm256_max_ps(y, _mm256_setzero_ps()));  // NaN → 0: max's 2nd operand
  }
  for (; i < m; ++i) {
    const float y = det_exp((logits[ids[i]] - best) / T);
    w[i] = y >= 0.0f ? y : 0.0f;
  }
}

}  // namespace invar
