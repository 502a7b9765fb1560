// AVX-512 copy of sampler.cpp's ranked weights (sampler_isa.h).
#include <cstring>

#include "core/detmath.h"
#include "core/detmath_simd.h"
#include "engine/sampler_isa.h"

namespace invar {

namespace {

// rank_key_bits lane-wise: ascending = ~key; sign set: ascending ^ 0x80000000, else ~ascending.
__m512 rank_values(__m512i key) {
  const __m512i asc = _mm512_xor_si512(key, _mm512_set1_epi32(-1));
  const __m512i neg = _mm512_srai_epi32(asc, 31);  // all ones where the sign bit is set
  const __m512i flip = _mm512_or_si512(_mm512_xor_si512(neg, _mm512_set1_epi32(-1)),
                                       _mm512_set1_epi32(int32_t(0x80000000u)));
  return _mm512_castsi512_ps(_mm512_xor_si512(asc, flip));
}

}  // namespace

void ranked_weights_avx512(const uint32_t* keys, int64_t m, uint32_t key_base, float best, float T,
                           float* w) {
  const __m512 vbest = _mm512_set1_ps(best), vt = _mm512_set1_ps(T);
  const __m512i vbase = _mm512_set1_epi32(int32_t(key_base));
  int64_t i = 0;
  for (; i + 16 <= m; i += 16) {
    const __m512i key = _mm512_add_epi32(_mm512_loadu_si512(keys + i), vbase);
    const __m512 l = rank_values(key);
    const __m512 y = simd512::exp_ps(_mm512_div_ps(_mm512_sub_ps(l, vbest), vt));
    _mm512_storeu_ps(w + i, _mm512_max_ps(y, _mm512_setzero_ps()));  // NaN → 0: max's 2nd operand
  }
  for (; i < m; ++i) {
    const uint32_t b = rank_key_bits(keys[i] + key_base);
    float l;
    std::memcpy(&l, &b, 4);
    const float y = det_exp((l - best) / T);
    w[i] = y >= 0.0f ? y : 0.0f;
  }
}

}  // namespace invar
