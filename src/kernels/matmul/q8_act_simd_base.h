// Private to the q8 profile's SIMD kernels (q8_act_simd.h and the prefill headers): the helpers
// they share. Compiled for AVX2 and for AVX-512 with VNNI (q8_act_avx2.cpp,
// q8_act_avx512.cpp).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/detmath_simd.h"  // <immintrin.h>, with GCC bug 105593 silenced

namespace invar::q8simd {
namespace {

#define Q8_INLINE inline __attribute__((always_inline))

Q8_INLINE int32_t hsum8(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}
Q8_INLINE float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}
Q8_INLINE __m256i load(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// acc + Σ pairs of (p16 · s16) as int32.
template <bool kVnni>
Q8_INLINE __m256i madd_acc(__m256i acc, __m256i p16, __m256i s16) {
  if constexpr (kVnni) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpwssd_epi32(acc, p16, s16);
#endif
  }
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, s16));
}

// The 8 totals of p[0..8) in order (exact integer sums).
Q8_INLINE __m256i totals8(const __m256i* p) {
  const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
  const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                          _mm256_permute2x128_si256(a, b, 0x31));
}

// A Q4_K/Q5_K superblock's 12 packed bytes at blk + 4 as 16 16-bit lanes: the 8 scales in the
// low half, the 8 mins in the high half (llama.cpp's unpacking of get_scale_min_k4).
Q8_INLINE __m256i k4_scales_mins(const uint8_t* blk) {
  constexpr uint32_t kMask1 = 0x3f3f3f3f, kMask2 = 0x0f0f0f0f, kMask3 = 0x03030303;
  uint32_t u[4];
  std::memcpy(u, blk + 4, 12);
  u[3] = ((u[2] >> 4) & kMask2) | (((u[1] >> 6) & kMask3) << 4);
  const uint32_t mins03 = u[1] & kMask1;
  u[1] = (u[2] & kMask2) | (((u[0] >> 6) & kMask3) << 4);
  u[2] = mins03;
  u[0] &= kMask1;
  return _mm256_cvtepu8_epi16(_mm_setr_epi32(int(u[0]), int(u[1]), int(u[2]), int(u[3])));
}

}  // namespace
}  // namespace invar::q8simd
