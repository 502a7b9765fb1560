// AVX-512 matrix product over the packed panels: one 16-lane register per panel.
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

#define V512_INLINE static inline __attribute__((always_inline))

struct V512 {
  __m512 v;

  // Register tile of the many-rows path: 8 rows × 2 panels = 16 accumulators (of 32 registers),
  // enough independent chains to cover the FMA latency on two pipes; per k it loads 2 weight
  // vectors and broadcasts 8 activations for 16 FMAs.
  static constexpr int kTileRows = 8;
  static constexpr int kTilePanels = 2;
  // 2 panels × 256 k × 64 B = 32 KiB of weights per group: stays in the 48 KiB L1.
  static constexpr int64_t kKBlock = 256;
  // 256 rows × 256 k of activations = 256 KiB: stay in the 1 MiB L2 across the panel groups.
  static constexpr int64_t kMBlock = 256;
  static constexpr int kDirectRows = 4;
  template <int R>
  static constexpr int direct_panels() {
    return 4;
  }

  V512_INLINE V512 zero() { return {_mm512_setzero_ps()}; }
  V512_INLINE V512 load(const float* p) { return {_mm512_loadu_ps(p)}; }
  V512_INLINE V512 load_n(const float* p, int n) {
    return {_mm512_maskz_loadu_ps(__mmask16((1u << n) - 1), p)};
  }
  V512_INLINE void store(float* p, V512 a) { _mm512_storeu_ps(p, a.v); }
  V512_INLINE void store_n(float* p, V512 a, int n) {
    _mm512_mask_storeu_ps(p, __mmask16((1u << n) - 1), a.v);
  }
  V512_INLINE V512 bcast(float x) { return {_mm512_set1_ps(x)}; }
  V512_INLINE V512 fma(V512 a, V512 b, V512 c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
  V512_INLINE V512 mul(V512 a, V512 b) { return {_mm512_mul_ps(a.v, b.v)}; }
  V512_INLINE V512 from_f16(const uint16_t* p) {
    return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
  }
  V512_INLINE V512 from_bf16(const uint16_t* p) {
    const __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return {_mm512_castsi512_ps(_mm512_slli_epi32(u, 16))};
  }
  V512_INLINE V512 from_i8(const int8_t* p) {
    const __m512i i = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return {_mm512_cvtepi32_ps(i)};
  }
};

#undef V512_INLINE

}  // namespace

void matmul_panels_avx512(const MatmulPacked& w, const float* x, int64_t rows, float* y,
                          int64_t p_begin, int64_t p_end) {
  matmul_tiles::panels_run<V512>(w, x, rows, y, p_begin, p_end);
}

}  // namespace invar
