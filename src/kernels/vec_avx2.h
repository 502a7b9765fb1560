// The 16-float vector type of the shared kernel bodies (kernels_simd.h) in AVX2 + FMA: two
// __m256, lanes 0..7 in `lo` and 8..15 in `hi` (V256x2), built from the 8-lane V256. Each
// operation is one IEEE operation per lane (or a load / store / conversion that moves exact
// values), so a body over V computes every lane exactly as the scalar reference computes that
// element, and as the AVX-512 register does.
//
// Only for the AVX2 translation unit (kernels_avx2.cpp).
#pragma once

#include <cstdint>

#include "core/detmath_simd.h"  // first: it silences GCC bug 105593 for the intrinsics below
#include "kernels/lanes_tree.h"

namespace invar::simd256 {
namespace {

#define V256_INLINE static inline __attribute__((always_inline))

// Lanes [0, n) of 8, for any n (≤ 0: none, ≥ 8: all).
inline __m256i lanes_first(int64_t n) {
  const int32_t c = int32_t(n < 0 ? 0 : n > 8 ? 8 : n);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

struct V256 {
  __m256 v;

  static constexpr int kLanes = 8;

  V256_INLINE V256 zero() { return {_mm256_setzero_ps()}; }
  V256_INLINE V256 load(const float* p) { return {_mm256_loadu_ps(p)}; }
  // p[0..n) for any n, zeros elsewhere; lanes past n are not read.
  V256_INLINE V256 load_n(const float* p, int64_t n) {
    if (n >= 8) return {_mm256_loadu_ps(p)};
    if (n <= 0) return zero();
    return {_mm256_maskload_ps(p, lanes_first(n))};
  }
  V256_INLINE void store(float* p, V256 a) { _mm256_storeu_ps(p, a.v); }
  V256_INLINE void store_n(float* p, V256 a, int64_t n) {
    if (n >= 8)
      _mm256_storeu_ps(p, a.v);
    else if (n > 0)
      _mm256_maskstore_ps(p, lanes_first(n), a.v);
  }
  V256_INLINE V256 gather_n(const float* base, int64_t stride, int64_t n) {
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                           _mm256_set1_epi32(int32_t(stride)));
    return {_mm256_mask_i32gather_ps(_mm256_setzero_ps(), base, idx,
                                     _mm256_castsi256_ps(lanes_first(n)), 4)};
  }
  V256_INLINE V256 keep_n(V256 a, int64_t n) {
    return {_mm256_and_ps(a.v, _mm256_castsi256_ps(lanes_first(n)))};
  }
  V256_INLINE V256 bcast(float x) { return {_mm256_set1_ps(x)}; }
  V256_INLINE V256 add(V256 a, V256 b) { return {_mm256_add_ps(a.v, b.v)}; }
  V256_INLINE V256 sub(V256 a, V256 b) { return {_mm256_sub_ps(a.v, b.v)}; }
  V256_INLINE V256 mul(V256 a, V256 b) { return {_mm256_mul_ps(a.v, b.v)}; }
  V256_INLINE V256 div(V256 a, V256 b) { return {_mm256_div_ps(a.v, b.v)}; }
  V256_INLINE V256 fma(V256 a, V256 b, V256 c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
  // fma(a, b, c) in lanes [0, n), c unchanged in the others.
  V256_INLINE V256 fma_n(V256 a, V256 b, V256 c, int64_t n) {
    return {
        _mm256_blendv_ps(c.v, _mm256_fmadd_ps(a.v, b.v, c.v), _mm256_castsi256_ps(lanes_first(n)))};
  }
  V256_INLINE V256 exp_det(V256 a) { return {exp_ps(a.v)}; }
  V256_INLINE V256 sigmoid(V256 a) { return {sigmoid_ps(a.v)}; }
  V256_INLINE V256 silu(V256 a) { return {silu_ps(a.v)}; }
};

struct V256x2 {
  V256 lo, hi;

  static constexpr int kLanes = 16;
  static constexpr int kDirectRows = 4;
  // Batched decode up to this many rows (vec_avx512.h says how). AVX2 on Zen 5, same run: M = 5
  // 96 / 101 / 108 GFLOP/s against the tiles' 91 / 80 / 86; M = 8 119 / 116 / 133 against 125 /
  // 115 / 106; the tiles win from M = 12 (144 / 124 / 141 against 121 / 118 / 133).
  static constexpr int kBatchedRows = 8;
  template <int R>
  static constexpr int direct_panels() {
    return R == 1 ? 4 : R <= 3 ? 2 : 1;
  }
  // Weight rows side by side in the F32/F16/BF16 few-rows kernels (f32_act_dense.h): as many as
  // the 16 ymm registers hold accumulators for.
  template <int R>
  static constexpr int dense_direct_rows() {
    return direct_panels<R>();
  }
  // Register tile of the quantised many-rows path, run one 8-lane half at a time
  // (qprefill::tile_halves): 4 activation rows × 3 outputs = 12 ymm accumulators, 3 for the
  // weights, 1 for the activation row; 7 loads per 12 FMAs. (The 2 × 2 tile of whole 16-lane
  // accumulators before it read 8 per 8; 4 × 2 halves read 6 per 8 and measured slower than 4 × 3.)
  static constexpr int kQTileRows = 4;
  static constexpr int kQTileCols = 3;
  static constexpr bool kSplitHalves = true;
  // Attention's weighted V sum: one 8-lane register per pass, kAttnHeadTile accumulators (a
  // 16-lane pass would need more than the 16 ymm registers).
  using Narrow = V256;
  static constexpr int kAttnVChunks = 1;

  V256_INLINE V256x2 zero() { return {V256::zero(), V256::zero()}; }
  V256_INLINE V256x2 load(const float* p) { return {V256::load(p), V256::load(p + 8)}; }
  V256_INLINE V256x2 load_n(const float* p, int64_t n) {
    return {V256::load_n(p, n), V256::load_n(p + 8, n - 8)};
  }
  V256_INLINE void store(float* p, V256x2 a) {
    V256::store(p, a.lo);
    V256::store(p + 8, a.hi);
  }
  V256_INLINE void store_n(float* p, V256x2 a, int64_t n) {
    V256::store_n(p, a.lo, n);
    V256::store_n(p + 8, a.hi, n - 8);
  }
  V256_INLINE V256x2 gather_n(const float* base, int64_t stride, int64_t n) {
    return {V256::gather_n(base, stride, n), V256::gather_n(base + 8 * stride, stride, n - 8)};
  }
  V256_INLINE V256x2 keep_n(V256x2 a, int64_t n) {
    return {V256::keep_n(a.lo, n), V256::keep_n(a.hi, n - 8)};
  }
  V256_INLINE V256x2 bcast(float x) {
    const V256 b = V256::bcast(x);
    return {b, b};
  }
  V256_INLINE V256x2 add(V256x2 a, V256x2 b) {
    return {V256::add(a.lo, b.lo), V256::add(a.hi, b.hi)};
  }
  V256_INLINE V256x2 sub(V256x2 a, V256x2 b) {
    return {V256::sub(a.lo, b.lo), V256::sub(a.hi, b.hi)};
  }
  V256_INLINE V256x2 mul(V256x2 a, V256x2 b) {
    return {V256::mul(a.lo, b.lo), V256::mul(a.hi, b.hi)};
  }
  V256_INLINE V256x2 div(V256x2 a, V256x2 b) {
    return {V256::div(a.lo, b.lo), V256::div(a.hi, b.hi)};
  }
  V256_INLINE V256x2 fma(V256x2 a, V256x2 b, V256x2 c) {
    return {V256::fma(a.lo, b.lo, c.lo), V256::fma(a.hi, b.hi, c.hi)};
  }
  V256_INLINE V256x2 fma_n(V256x2 a, V256x2 b, V256x2 c, int64_t n) {
    return {V256::fma_n(a.lo, b.lo, c.lo, n), V256::fma_n(a.hi, b.hi, c.hi, n - 8)};
  }
  V256_INLINE V256x2 exp_det(V256x2 a) { return {V256::exp_det(a.lo), V256::exp_det(a.hi)}; }
  V256_INLINE V256x2 sigmoid(V256x2 a) { return {V256::sigmoid(a.lo), V256::sigmoid(a.hi)}; }
  V256_INLINE V256x2 silu(V256x2 a) { return {V256::silu(a.lo), V256::silu(a.hi)}; }
  V256_INLINE float sum(V256x2 a) { return simd_lanes::tree16(a.lo.v, a.hi.v); }
  V256_INLINE V256x2 from_f16(const uint16_t* p) {
    return {{_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))},
            {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)))}};
  }
  V256_INLINE V256x2 from_bf16(const uint16_t* p) {
    const __m256i lo = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256i hi =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)));
    return {{_mm256_castsi256_ps(_mm256_slli_epi32(lo, 16))},
            {_mm256_castsi256_ps(_mm256_slli_epi32(hi, 16))}};
  }
  // Lane i = table[(p[i] >> shift) & 15] for shift 0 or 4: a 4-bit code looked up in 16 floats
  // (two 8-entry permutes, chosen by bit 3 of the code).
  V256_INLINE V256x2 lut16(V256x2 table, const uint8_t* p, int shift) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    __m256i lo = _mm256_cvtepu8_epi32(bytes), hi = _mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8));
    if (shift) {
      lo = _mm256_srli_epi32(lo, 4);
      hi = _mm256_srli_epi32(hi, 4);
    }
    return {{lut8x2(table, lo)}, {lut8x2(table, hi)}};
  }
  static inline __m256 lut8x2(V256x2 table, __m256i idx) {
    const __m256 a = _mm256_permutevar8x32_ps(table.lo.v, idx);
    const __m256 b = _mm256_permutevar8x32_ps(table.hi.v, idx);
    return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
  }
  // Lane i = fma(d, code_i, m) for the 4-bit codes code_i = (p[i] >> shift) & 15, shift 0 or 4:
  // the value lut16 would look up in the table fma(d, 0..15, m), computed instead (a lookup is
  // two permutes and a blend per 8 lanes here, all on the shuffle ports).
  V256_INLINE V256x2 nibbles_fma(const uint8_t* p, int shift, float d, float m) {
    __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    __m256i hi = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8)));
    if (shift) {
      lo = _mm256_srli_epi32(lo, 4);
      hi = _mm256_srli_epi32(hi, 4);
    } else {
      lo = _mm256_and_si256(lo, _mm256_set1_epi32(15));
      hi = _mm256_and_si256(hi, _mm256_set1_epi32(15));
    }
    const __m256 dv = _mm256_set1_ps(d), mv = _mm256_set1_ps(m);
    return {{_mm256_fmadd_ps(dv, _mm256_cvtepi32_ps(lo), mv)},
            {_mm256_fmadd_ps(dv, _mm256_cvtepi32_ps(hi), mv)}};
  }
  // The 16 signed bytes of q as F32 (exact).
  V256_INLINE V256x2 from_i8v(__m128i q) {
    return {{_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))},
            {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8)))}};
  }
};

#undef V256_INLINE

}  // namespace
}  // namespace invar::simd256
