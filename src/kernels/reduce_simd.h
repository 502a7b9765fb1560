// The canonical 16-lane row reduction (reduce.h) in AVX2 and AVX-512 registers. AVX-512 holds
// lanes 0..15 in one register; AVX2 holds lanes 0..7 in `lo` and 8..15 in `hi`. Tails are read
// with zero-filled masked loads: adding +0 to a lane leaves it unchanged (a lane that starts at
// +0 can never be −0), so the result equals the scalar loop that skips the missing elements.
//
// Only for *_avx2.cpp / *_avx512.cpp files; internal linkage per ISA (see detmath_simd.h).
#pragma once

// GCC 12 reports its own _mm512_undefined_*() placeholders inside AVX-512 intrinsics as
// maybe-uninitialized once they are inlined (GCC bug 105593): a false positive.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <cstdint>

#if defined(__AVX512F__)
namespace invar::simd512 {
namespace {

inline __mmask16 tail_mask(int64_t rem) {
  return rem >= 16 ? __mmask16(0xffff) : __mmask16((1u << rem) - 1u);
}
// p[0..min(rem, 16)), zeros elsewhere. Whole chunks use plain loads: masked loads stall long
// sweeps on some cores (measured on Zen 4: 1.7x slower attention over a 4096-token history).
inline __m512 load_tail(const float* p, int64_t rem) {
  return rem >= 16 ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(tail_mask(rem), p);
}
inline void store_tail(float* p, int64_t rem, __m512 v) {
  if (rem >= 16)
    _mm512_storeu_ps(p, v);
  else
    _mm512_mask_storeu_ps(p, tail_mask(rem), v);
}

// total = ((l0+l8)+(l4+l12)) + ((l2+l10)+(l6+l14)) + … exactly as reduce.h's tree.
inline float tree16(__m512 acc) {
  const __m256 s8 = _mm256_add_ps(_mm512_extractf32x8_ps(acc, 0), _mm512_extractf32x8_ps(acc, 1));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
  return _mm_cvtss_f32(s1);
}

// Σ a·b in the canonical order (product rounded, then added).
inline float dot16(const float* a, const float* b, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
  if (i < n)
    acc = _mm512_add_ps(acc, _mm512_mul_ps(load_tail(a + i, n - i), load_tail(b + i, n - i)));
  return tree16(acc);
}

}  // namespace
}  // namespace invar::simd512

#elif defined(__AVX2__) && defined(__FMA__)
namespace invar::simd256 {
namespace {

inline __m256i tail_mask(int64_t rem) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int32_t(rem > 8 ? 8 : rem)), idx);
}
// Elements p[0..rem) (rem may be ≤ 0 or ≥ 8), zeros elsewhere.
inline __m256 load_tail(const float* p, int64_t rem) {
  if (rem >= 8) return _mm256_loadu_ps(p);
  if (rem <= 0) return _mm256_setzero_ps();
  return _mm256_maskload_ps(p, tail_mask(rem));
}
inline void store_tail(float* p, int64_t rem, __m256 v) {
  if (rem >= 8)
    _mm256_storeu_ps(p, v);
  else if (rem > 0)
    _mm256_maskstore_ps(p, tail_mask(rem), v);
}

// lo = lanes 0..7, hi = lanes 8..15.
inline float tree16(__m256 lo, __m256 hi) {
  const __m256 s8 = _mm256_add_ps(lo, hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
  return _mm_cvtss_f32(s1);
}

inline float dot16(const float* a, const float* b, int64_t n) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    lo = _mm256_add_ps(lo, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    hi = _mm256_add_ps(hi, _mm256_mul_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8)));
  }
  if (i < n) {
    const int64_t rem = n - i;
    lo = _mm256_add_ps(lo, _mm256_mul_ps(load_tail(a + i, rem), load_tail(b + i, rem)));
    if (rem > 8)
      hi = _mm256_add_ps(
          hi, _mm256_mul_ps(load_tail(a + i + 8, rem - 8), load_tail(b + i + 8, rem - 8)));
  }
  return tree16(lo, hi);
}

}  // namespace
}  // namespace invar::simd256
#endif
