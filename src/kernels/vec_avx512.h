// The 16-float vector type of the shared kernel bodies (kernels_simd.h) in AVX-512: one __m512,
// lane i of the vector is lane i of the register. Each operation is one IEEE operation per lane
// (or a load / store / conversion that moves exact values), so a body over V computes every
// lane exactly as the scalar reference computes that element.
//
// Only for the AVX-512 translation unit (kernels_avx512.cpp).
#pragma once

#include <cstdint>

#include "core/detmath_simd.h"  // first: it silences GCC bug 105593 for the intrinsics below
#include "kernels/lanes_tree.h"

// The same GCC 12 false positive in its definite form, from the AVX-512 intrinsics' undefined
// pass-through operands once they are inlined into a function whose inputs come through memory.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace invar::simd512 {
namespace {

#define V512_INLINE static inline __attribute__((always_inline))

// Lanes [0, n) of 16, for any n (≤ 0: none, ≥ 16: all).
inline __mmask16 lanes_first(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1u);
}

struct V512 {
  __m512 v;

  static constexpr int kLanes = 16;
  static constexpr int kDirectRows = 4;
  // Batched decode up to this many rows: kDirectRows-row passes over groups of 16 outputs
  // (f32_act_simd.h direct_passes). Measured on Zen 5, 2 threads, 4096 x 2048 (bench matmul
  // --clock cpu): q4_K / q6_K / q8_0 at M = 5 210 / 193 / 184 GFLOP/s against the tiles' 116 / 96
  // / 105, at M = 8 257 / 240 / 252 against 192 / 183 / 168; even at M = 12, behind at 16.
  static constexpr int kBatchedRows = 12;
  template <int R>
  static constexpr int direct_panels() {
    return 4;
  }
  // Weight rows side by side in the F32/F16/BF16 few-rows kernels (f32_act_dense.h): R·P
  // accumulators.
  template <int R>
  static constexpr int dense_direct_rows() {
    return R == 1 ? 8 : 4;
  }
  // Register tile of the quantised many-rows path (f32_act_simd.h): 4 activation rows × 6
  // outputs = 24 lane accumulators, 6 weight vectors and one activation vector of 32 registers;
  // per 16 k it loads 10 vectors for 24 FMAs. Measured against 6 × 4, 8 × 3 and 5 × 5 on Zen 5:
  // 4 activation streams instead of 6 keep more of the dequantised group in L1 (5-10% faster).
  static constexpr int kQTileRows = 4;
  static constexpr int kQTileCols = 6;
  // Attention's weighted V sum: 2 vectors (32 output lanes) per pass, kAttnHeadTile·2
  // accumulators.
  using Narrow = V512;
  static constexpr int kAttnVChunks = 2;

  V512_INLINE V512 zero() { return {_mm512_setzero_ps()}; }
  V512_INLINE V512 load(const float* p) { return {_mm512_loadu_ps(p)}; }
  // p[0..n), zeros elsewhere. Whole vectors use plain loads: masked loads stall long sweeps on
  // some cores (measured on Zen 4: 1.7x slower attention over a 4096-token history).
  V512_INLINE V512 load_n(const float* p, int64_t n) {
    return {n >= 16 ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(lanes_first(n), p)};
  }
  V512_INLINE void store(float* p, V512 a) { _mm512_storeu_ps(p, a.v); }
  V512_INLINE void store_n(float* p, V512 a, int64_t n) {
    if (n >= 16)
      _mm512_storeu_ps(p, a.v);
    else
      _mm512_mask_storeu_ps(p, lanes_first(n), a.v);
  }
  // base[i·stride] for lanes i < n, zeros elsewhere.
  V512_INLINE V512 gather_n(const float* base, int64_t stride, int64_t n) {
    const __m512i idx =
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32(int32_t(stride)));
    return {_mm512_mask_i32gather_ps(_mm512_setzero_ps(), lanes_first(n), idx, base, 4)};
  }
  // a with lanes ≥ n set to +0.
  V512_INLINE V512 keep_n(V512 a, int64_t n) { return {_mm512_maskz_mov_ps(lanes_first(n), a.v)}; }
  V512_INLINE V512 bcast(float x) { return {_mm512_set1_ps(x)}; }
  V512_INLINE V512 add(V512 a, V512 b) { return {_mm512_add_ps(a.v, b.v)}; }
  V512_INLINE V512 sub(V512 a, V512 b) { return {_mm512_sub_ps(a.v, b.v)}; }
  V512_INLINE V512 mul(V512 a, V512 b) { return {_mm512_mul_ps(a.v, b.v)}; }
  V512_INLINE V512 div(V512 a, V512 b) { return {_mm512_div_ps(a.v, b.v)}; }
  // a·b + c, rounded once.
  V512_INLINE V512 fma(V512 a, V512 b, V512 c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
  // fma(a, b, c) in lanes [0, n), c unchanged in the others.
  V512_INLINE V512 fma_n(V512 a, V512 b, V512 c, int64_t n) {
    return {_mm512_mask3_fmadd_ps(a.v, b.v, c.v, lanes_first(n))};
  }
  V512_INLINE V512 exp_det(V512 a) { return {exp_ps(a.v)}; }
  V512_INLINE V512 sigmoid(V512 a) { return {sigmoid_ps(a.v)}; }
  V512_INLINE V512 silu(V512 a) { return {silu_ps(a.v)}; }
  // The canonical tree over the 16 lanes (reduce.h).
  V512_INLINE float sum(V512 a) {
    return simd_lanes::tree16(_mm512_extractf32x8_ps(a.v, 0), _mm512_extractf32x8_ps(a.v, 1));
  }
  // The first three levels of the reduce.h additions of N = 8 or 16 vectors, s8 = l[i] + l[i+8],
  // s4 = s8[i] + s8[i+4], s2 = s4[i] + s4[i+2], the operands of 2, 4 and 8 outputs gathered into
  // one register per level: lane t of d[j] holds s2 of output 8j + t, then 8j + 4 + t.
  template <int N>
  V512_INLINE void sums_s2(const V512 (&a)[N], __m512 (&d)[N / 8]) {
    __m512 b[N / 2], c[N / 4];
#pragma GCC unroll 8
    for (int j = 0; j < N / 2; ++j) {  // lanes 0..7: s8 of output 2j; 8..15: of 2j+1
      b[j] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * j].v, a[2 * j + 1].v, 0x44),
                           _mm512_shuffle_f32x4(a[2 * j].v, a[2 * j + 1].v, 0xee));
    }
#pragma GCC unroll 4
    for (int j = 0; j < N / 4; ++j) {  // 128-bit lane t: s4 of output 4j + t
      c[j] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * j], b[2 * j + 1], 0x88),
                           _mm512_shuffle_f32x4(b[2 * j], b[2 * j + 1], 0xdd));
    }
#pragma GCC unroll 2
    for (int j = 0; j < N / 8; ++j) {
      const __m512d lo = _mm512_castps_pd(c[2 * j]), hi = _mm512_castps_pd(c[2 * j + 1]);
      d[j] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(lo, hi)),
                           _mm512_castpd_ps(_mm512_unpackhi_pd(lo, hi)));
    }
  }
  // Element 4t + u of the result: s2[0] + s2[1] of output t + 4u (u = 2, 3 from d1).
  V512_INLINE __m512 sums_last(__m512 d0, __m512 d1) {
    return _mm512_add_ps(_mm512_shuffle_ps(d0, d1, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_ps(d0, d1, _MM_SHUFFLE(3, 1, 3, 1)));
  }
  // out[i] = sum(a[i]) for 16 vectors: each output's reduce.h additions, gathered per level as
  // sums_s2 does, then s2[0] + s2[1] (47 instructions instead of 16 sums).
  V512_INLINE void sum16(const V512 (&a)[16], float* out) {
    __m512 d[2];
    sums_s2<16>(a, d);
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_storeu_ps(out, _mm512_permutexvar_ps(order, sums_last(d[0], d[1])));
  }
  // out[i] = sum(a[i]) for 8 vectors: sum16's additions for its first 8 outputs, without the
  // shuffles and adds of the 8 it would sum from zeros (26 instructions instead of 47).
  V512_INLINE void sum8(const V512 (&a)[8], float* out) {
    __m512 d[1];
    sums_s2<8>(a, d);
    // Elements 4t and 4t + 1 hold outputs t and t + 4 (4t + 2, 4t + 3 repeat them).
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 4, 8, 12, 1, 5, 9, 13);
    _mm256_storeu_ps(out,
                     _mm512_castps512_ps256(_mm512_permutexvar_ps(order, sums_last(d[0], d[0]))));
  }
  V512_INLINE V512 from_f16(const uint16_t* p) {
    return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
  }
  V512_INLINE V512 from_bf16(const uint16_t* p) {
    const __m512i u =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return {_mm512_castsi512_ps(_mm512_slli_epi32(u, 16))};
  }
  // The 16 signed bytes of q as F32 (exact).
  V512_INLINE V512 from_i8v(__m128i q) {
    return {_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q))};
  }
  // Lane i = table[(p[i] >> shift) & 15] for shift 0 or 4: a 4-bit code looked up in 16 floats.
  V512_INLINE V512 lut16(V512 table, const uint8_t* p, int shift) {
    __m512i idx = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    if (shift) idx = _mm512_srli_epi32(idx, 4);
    return {_mm512_permutexvar_ps(idx, table.v)};  // uses the index's low 4 bits
  }
};

#undef V512_INLINE

}  // namespace
}  // namespace invar::simd512
