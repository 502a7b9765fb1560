// AVX-512 conv: 16 channels per register, the window held in registers across the tokens.
#include "core/detmath_simd.h"
#include "kernels/kernels_isa.h"
#include "kernels/reduce_simd.h"

namespace invar::kern_avx512 {

using namespace simd512;

void conv1d_silu(const float* x, const float* w, float* state, int64_t t, int64_t c, int64_t kc,
                 float* y) {
  __m512 win[16], wt[16];
  const __m512i col =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(int32_t(kc)));
  for (int64_t ch = 0; ch < c; ch += 16) {
    const __mmask16 k = tail_mask(c - ch);
    for (int64_t j = 0; j < kc; ++j)
      wt[j] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), k, col, w + ch * kc + j, 4);
    for (int64_t j = 0; j + 1 < kc; ++j) win[j] = load_tail(state + j * c + ch, c - ch);
    for (int64_t tt = 0; tt < t; ++tt) {
      win[kc - 1] = load_tail(x + tt * c + ch, c - ch);
      __m512 acc = _mm512_setzero_ps();
      for (int64_t j = 0; j < kc; ++j) acc = _mm512_fmadd_ps(win[j], wt[j], acc);
      store_tail(y + tt * c + ch, c - ch, silu_ps(acc));
      for (int64_t j = 0; j + 1 < kc; ++j) win[j] = win[j + 1];
    }
    for (int64_t j = 0; j + 1 < kc; ++j) store_tail(state + j * c + ch, c - ch, win[j]);
  }
}

}  // namespace invar::kern_avx512
