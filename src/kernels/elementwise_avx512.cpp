// AVX-512 swiglu and sigmoid gate: the scalar expressions of elementwise.cpp, 16 lanes wide.
#include "core/detmath_simd.h"
#include "kernels/kernels_isa.h"
#include "kernels/reduce_simd.h"

namespace invar::kern_avx512 {

using namespace simd512;

void swiglu(const float* gate, const float* up, int64_t n, float* y) {
  for (int64_t i = 0; i < n; i += 16)
    store_tail(y + i, n - i,
               _mm512_mul_ps(silu_ps(load_tail(gate + i, n - i)), load_tail(up + i, n - i)));
}

void sigmoid_mul_inplace(float* y, const float* gate, int64_t n) {
  for (int64_t i = 0; i < n; i += 16)
    store_tail(y + i, n - i,
               _mm512_mul_ps(load_tail(y + i, n - i), sigmoid_ps(load_tail(gate + i, n - i))));
}

}  // namespace invar::kern_avx512
