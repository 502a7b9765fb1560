// AVX-512 copy of sampler.cpp's ranked weights (sampler_isa.h).
#include <algorithm>
#include <cstring>

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

int64_t ranked_weights_avx512(const uint32_t* keys, int64_t m, uint32_t key_base, float best,
                              float T, float* w) {
  const __m512 vbest = _mm512_set1_ps(best), vt = _mm512_set1_ps(T);
  const __m512i vbase = _mm512_set1_epi32(int32_t(key_base));
  int64_t i = 0;
  for (; i + 16 <= m; i += 16) {
    const __m512i key = _mm512_add_epi32(_mm512_loadu_si512(keys + i), vbase);
    const __m512 l = rank_values(key);
    const __m512 y = simd512::exp_ps(_mm512_div_ps(_mm512_sub_ps(l, vbest), vt));
    _mm512_storeu_ps(w + i, _mm512_max_ps(y, _mm512_setzero_ps()));  // NaN → 0: max's 2nd operand
  }
  return i;
}

bool row_max_finite_avx512(const float* x, int64_t n, float* best) {
  const __m512 inf = _mm512_set1_ps(__builtin_inff());
  __m512 mx = _mm512_set1_ps(-__builtin_inff());
  __mmask16 bad = 0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    bad |= _mm512_cmp_ps_mask(v, inf, _CMP_NLT_UQ);  // +inf or NaN (−inf is a masked id)
    mx = _mm512_max_ps(v, mx);
  }
  // The lanes reduced by hand: GCC 12's _mm512_reduce_* trip -Wuninitialized (bug 105593).
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, mx);
  float m = lanes[0];
  for (float l : lanes) m = l > m ? l : m;
  bool finite = bad == 0;
  for (; i < n; ++i) {
    finite &= x[i] == x[i] && x[i] < __builtin_inff();
    if (x[i] > m) m = x[i];
  }
  *best = m;
  return finite;
}

int64_t head_keys_avx512(const float* x, int64_t n, float best, float T, float z_cut,
                         uint32_t key_best, uint32_t* keys, uint32_t* key_last) {
  const __m512 vbest = _mm512_set1_ps(best), vt = _mm512_set1_ps(T), vcut = _mm512_set1_ps(z_cut);
  const __m512i sign = _mm512_set1_epi32(int32_t(0x80000000u));
  const __m512i vkb = _mm512_set1_epi32(int32_t(key_best));
  __m512i last = _mm512_setzero_si512();  // keys less key_best are ≥ 0
  int64_t m = 0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    const __mmask16 in =
        _mm512_cmp_ps_mask(_mm512_div_ps(_mm512_sub_ps(v, vbest), vt), vcut, _CMP_GE_OQ);
    if (!in) continue;
    v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_EQ_OQ), v,
                             _mm512_setzero_ps());  // −0 → +0
    // rank_key: the bits xor (all ones if negative, else the sign bit), complemented.
    const __m512i b = _mm512_castps_si512(v);
    const __m512i asc = _mm512_xor_si512(b, _mm512_or_si512(_mm512_srai_epi32(b, 31), sign));
    const __m512i key = _mm512_sub_epi32(_mm512_xor_si512(asc, _mm512_set1_epi32(-1)), vkb);
    last = _mm512_mask_max_epu32(last, in, last, key);
    _mm512_mask_compressstoreu_epi32(keys + m, in, key);
    m += __builtin_popcount(in);
  }
  alignas(64) uint32_t key_lanes[16];
  _mm512_store_si512(key_lanes, last);
  uint32_t kl = 0;
  for (uint32_t k : key_lanes) kl = std::max(kl, k);
  for (; i < n; ++i) {
    float v = x[i];
    if ((v - best) / T >= z_cut) {
      if (v == 0.0f) v = 0.0f;
      uint32_t b;
      std::memcpy(&b, &v, 4);
      const uint32_t key = ~((b & 0x80000000u) ? ~b : (b | 0x80000000u)) - key_best;
      kl = std::max(kl, key);
      keys[m++] = key;
    }
  }
  *key_last = kl + key_best;
  return m;
}

}  // namespace invar
