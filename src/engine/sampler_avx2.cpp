// AVX2 copy of sampler.cpp's ranked weights (sampler_isa.h).
#include "core/detmath_simd.h"
#include "engine/sampler_isa.h"

namespace invar {

namespace {

// rank_key_bits lane-wise: ascending = ~key; sign set: ascending ^ 0x80000000, else ~ascending.
__m256 rank_values(__m256i key) {
  const __m256i ones = _mm256_set1_epi32(-1);
  const __m256i asc = _mm256_xor_si256(key, ones);
  const __m256i neg = _mm256_srai_epi32(asc, 31);  // all ones where the sign bit is set
  const __m256i flip =
      _mm256_or_si256(_mm256_xor_si256(neg, ones), _mm256_set1_epi32(int32_t(0x80000000u)));
  return _mm256_castsi256_ps(_mm256_xor_si256(asc, flip));
}

}  // namespace

int64_t ranked_weights_avx2(const uint32_t* keys, int64_t m, uint32_t key_base, float best, float T,
                            float* w) {
  const __m256 vbest = _mm256_set1_ps(best), vt = _mm256_set1_ps(T);
  const __m256i vbase = _mm256_set1_epi32(int32_t(key_base));
  int64_t i = 0;
  for (; i + 8 <= m; i += 8) {
    const __m256i key =
        _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys + i)), vbase);
    const __m256 l = rank_values(key);
    const __m256 y = simd256::exp_ps(_mm256_div_ps(_mm256_sub_ps(l, vbest), vt));
    _mm256_storeu_ps(w + i, _mm256_max_ps(y, _mm256_setzero_ps()));  // NaN → 0: max's 2nd operand
  }
  return i;
}

}  // namespace invar
