// AVX-512 swiglu and sigmoid gate: the scalar expressions of elementwise.cpp, 16 lanes wide.
#include "core/detmath_simd.h"
#include "kernels/kernels_isa.h"
#include "kernels/reduce_simd.h"

namespace invar::kern_avx512 {

using namespace simd512;

void swiglu(const float* gate, const float* up, int64_t n, float* y) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(silu_ps(_mm512_maskz_loadu_ps(m, gate + i)),
                                                  _mm512_maskz_loadu_ps(m, up + i)));
  }
}

void sigmoid_mul_inplace(float* y, const float* gate, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + i),
                                                  sigmoid_ps(_mm512_maskz_loadu_ps(m, gate + i))));
  }
}

}  // namespace invar::kern_avx512
