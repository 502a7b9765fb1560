// Lane-wise copies of det_exp / det_sigmoid / det_silu (detmath.cpp) for AVX2 and AVX-512: the
// same constants and the same IEEE operations in the same order, so every lane equals the scalar
// function bit for bit. Out-of-range and NaN lanes are computed on a clamped input and replaced
// by the scalar function's special value afterwards.
//
// Only for files compiled with the ISA flags (*_avx2.cpp, *_avx512.cpp). Each ISA gets its own
// namespace with internal linkage, so one TU's instructions never leak into another's.
#pragma once

// GCC 12 reports its own _mm512_undefined_*() placeholders inside AVX-512 intrinsics as
// maybe-uninitialized once they are inlined (GCC bug 105593): a false positive.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <cstdint>

#include "core/detmath_consts.h"

#if defined(__AVX512F__)
namespace invar::simd512 {
namespace {

inline __m512 exp_ps(__m512 x) {
  using namespace detmath;
  const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kExpLo)), _mm512_set1_ps(kExpHi));
  const __m512 t = _mm512_mul_ps(xc, _mm512_set1_ps(kLog2e));
  const __m512 magic = _mm512_set1_ps(kRoundMagic);
  const __m512 nf = _mm512_sub_ps(_mm512_add_ps(t, magic), magic);
  __m512 r = _mm512_fnmadd_ps(nf, _mm512_set1_ps(kLn2Hi), xc);
  r = _mm512_fnmadd_ps(nf, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kExpP5);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpP4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpP3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpP2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpP1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpP0));
  const __m512 r2 = _mm512_mul_ps(r, r);
  __m512 y = _mm512_fmadd_ps(p, r2, r);
  y = _mm512_add_ps(y, _mm512_set1_ps(1.0f));
  const __m512i n = _mm512_cvtps_epi32(nf);
  const __m512i n1 = _mm512_srai_epi32(n, 1);
  const __m512i n2 = _mm512_sub_epi32(n, n1);
  const __m512i bias = _mm512_set1_epi32(127);
  y = _mm512_mul_ps(y, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23)));
  y = _mm512_mul_ps(y, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23)));
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpHi), _CMP_GT_OQ), y,
                           _mm512_set1_ps(__builtin_inff()));
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpLo), _CMP_LT_OQ), y,
                           _mm512_setzero_ps());
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
  return y;
}

inline __m512 neg_ps(__m512 x) {
  return _mm512_castsi512_ps(
      _mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(int32_t(0x80000000u))));
}

// 1/(1+e^−x)
inline __m512 sigmoid_ps(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(one, _mm512_add_ps(one, exp_ps(neg_ps(x))));
}

// x/(1+e^−x)
inline __m512 silu_ps(__m512 x) {
  return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), exp_ps(neg_ps(x))));
}

}  // namespace
}  // namespace invar::simd512

#elif defined(__AVX2__) && defined(__FMA__)
namespace invar::simd256 {
namespace {

inline __m256 exp_ps(__m256 x) {
  using namespace detmath;
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kExpLo)), _mm256_set1_ps(kExpHi));
  const __m256 t = _mm256_mul_ps(xc, _mm256_set1_ps(kLog2e));
  const __m256 magic = _mm256_set1_ps(kRoundMagic);
  const __m256 nf = _mm256_sub_ps(_mm256_add_ps(t, magic), magic);
  __m256 r = _mm256_fnmadd_ps(nf, _mm256_set1_ps(kLn2Hi), xc);
  r = _mm256_fnmadd_ps(nf, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kExpP5);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpP4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpP3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpP2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpP1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpP0));
  const __m256 r2 = _mm256_mul_ps(r, r);
  __m256 y = _mm256_fmadd_ps(p, r2, r);
  y = _mm256_add_ps(y, _mm256_set1_ps(1.0f));
  const __m256i n = _mm256_cvtps_epi32(nf);
  const __m256i n1 = _mm256_srai_epi32(n, 1);
  const __m256i n2 = _mm256_sub_epi32(n, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  y = _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23)));
  y = _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23)));
  y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()),
                       _mm256_cmp_ps(x, _mm256_set1_ps(kExpHi), _CMP_GT_OQ));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(),
                       _mm256_cmp_ps(x, _mm256_set1_ps(kExpLo), _CMP_LT_OQ));
  y = _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  return y;
}

inline __m256 neg_ps(__m256 x) {
  return _mm256_xor_ps(x, _mm256_set1_ps(-0.0f));
}

// 1/(1+e^−x)
inline __m256 sigmoid_ps(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp_ps(neg_ps(x))));
}

// x/(1+e^−x)
inline __m256 silu_ps(__m256 x) {
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), exp_ps(neg_ps(x))));
}

}  // namespace
}  // namespace invar::simd256
#endif
