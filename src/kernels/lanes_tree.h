// The canonical 16-lane tree of reduce.h on x86 registers, given lanes 0..7 in `lo` and lanes
// 8..15 in `hi`: s8 = lo + hi, then s4, s2 and the total over the low halves, in reduce.h's order.
// Shared by vec_avx2.h and vec_avx512.h (AVX-512 extracts its two halves first).
//
// Only for *_avx2.cpp / *_avx512.cpp files; internal linkage per ISA (see detmath_simd.h).
#pragma once

#include <immintrin.h>

namespace invar::simd_lanes {
namespace {

inline float tree16(__m256 lo, __m256 hi) {
  const __m256 s8 = _mm256_add_ps(lo, hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
  return _mm_cvtss_f32(s1);
}

}  // namespace
}  // namespace invar::simd_lanes
