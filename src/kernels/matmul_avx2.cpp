// AVX2 + FMA matrix product over the packed panels: a 16-wide panel is two 8-lane registers, each
// lane still one independent chain, so the bits equal the AVX-512 and scalar paths.
// GCC 12 reports its own _mm512_undefined_*() placeholders inside AVX-512 intrinsics as
// maybe-uninitialized once they are inlined (GCC bug 105593): a false positive.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include "kernels/matmul_packed.h"
#include "kernels/matmul_tiles.h"

namespace invar {
namespace {

#define V256_INLINE static inline __attribute__((always_inline))

// Lanes [0, n) set, for n in 0..8.
inline __m256i lane_mask(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

struct V256x2 {
  __m256 lo, hi;

  // Register tile of the many-rows path: 6 rows × 1 panel = 12 accumulators, plus 2 weight
  // registers and a broadcast: the 16 ymm registers, as in the classic 6×16 AVX2 kernel.
  static constexpr int kTileRows = 6;
  static constexpr int kTilePanels = 1;
  static constexpr int64_t kKBlock = 256;
  static constexpr int64_t kMBlock = 252;  // whole tiles of 6 rows
  static constexpr int kDirectRows = 4;
  template <int R>
  static constexpr int direct_panels() {
    return R == 1 ? 4 : R <= 3 ? 2 : 1;
  }

  V256_INLINE V256x2 zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  V256_INLINE V256x2 load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  V256_INLINE V256x2 load_n(const float* p, int n) {
    return {_mm256_maskload_ps(p, lane_mask(n)), _mm256_maskload_ps(p + 8, lane_mask(n - 8))};
  }
  V256_INLINE void store(float* p, V256x2 a) {
    _mm256_storeu_ps(p, a.lo);
    _mm256_storeu_ps(p + 8, a.hi);
  }
  V256_INLINE void store_n(float* p, V256x2 a, int n) {
    _mm256_maskstore_ps(p, lane_mask(n), a.lo);
    _mm256_maskstore_ps(p + 8, lane_mask(n - 8), a.hi);
  }
  V256_INLINE V256x2 bcast(float x) {
    const __m256 b = _mm256_set1_ps(x);
    return {b, b};
  }
  V256_INLINE V256x2 fma(V256x2 a, V256x2 b, V256x2 c) {
    return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
  }
  V256_INLINE V256x2 mul(V256x2 a, V256x2 b) {
    return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)};
  }
  V256_INLINE V256x2 from_f16(const uint16_t* p) {
    return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)))};
  }
  V256_INLINE V256x2 from_bf16(const uint16_t* p) {
    const __m256i lo = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256i hi =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(lo, 16)),
            _mm256_castsi256_ps(_mm256_slli_epi32(hi, 16))};
  }
  V256_INLINE V256x2 from_i8(const int8_t* p) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)),
            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8)))};
  }
};

#undef V256_INLINE

}  // namespace

void matmul_panels_avx2(const MatmulPacked& w, const float* x, int64_t rows, float* y,
                        int64_t p_begin, int64_t p_end) {
  matmul_tiles::panels_run<V256x2>(w, x, rows, y, p_begin, p_end);
}

}  // namespace invar
