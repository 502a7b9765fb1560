// AVX2 conv: 8 channels per register, the window held in registers across the tokens.
#include "core/detmath_simd.h"
#include "kernels/kernels_isa.h"
#include "kernels/reduce_simd.h"

namespace invar::kern_avx2 {

using namespace simd256;

void conv1d_silu(const float* x, const float* w, float* state, int64_t t, int64_t c, int64_t kc,
                 float* y) {
  __m256 win[16], wt[16];
  const __m256i col =
      _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(int32_t(kc)));
  for (int64_t ch = 0; ch < c; ch += 8) {
    const int64_t rem = c - ch;
    const __m256 kmask = _mm256_castsi256_ps(tail_mask(rem));
    for (int64_t j = 0; j < kc; ++j)
      wt[j] = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), w + ch * kc + j, col, kmask, 4);
    for (int64_t j = 0; j + 1 < kc; ++j) win[j] = load_tail(state + j * c + ch, rem);
    for (int64_t tt = 0; tt < t; ++tt) {
      win[kc - 1] = load_tail(x + tt * c + ch, rem);
      __m256 acc = _mm256_setzero_ps();
      for (int64_t j = 0; j < kc; ++j) acc = _mm256_fmadd_ps(win[j], wt[j], acc);
      store_tail(y + tt * c + ch, rem, silu_ps(acc));
      for (int64_t j = 0; j + 1 < kc; ++j) win[j] = win[j + 1];
    }
    for (int64_t j = 0; j + 1 < kc; ++j) store_tail(state + j * c + ch, rem, win[j]);
  }
}

}  // namespace invar::kern_avx2
