// AVX2 swiglu and sigmoid gate: the scalar expressions of elementwise.cpp, 8 lanes wide.
#include "core/detmath_simd.h"
#include "kernels/kernels_isa.h"
#include "kernels/reduce_simd.h"

namespace invar::kern_avx2 {

using namespace simd256;

void swiglu(const float* gate, const float* up, int64_t n, float* y) {
  for (int64_t i = 0; i < n; i += 8)
    store_tail(y + i, n - i,
               _mm256_mul_ps(silu_ps(load_tail(gate + i, n - i)), load_tail(up + i, n - i)));
}

void sigmoid_mul_inplace(float* y, const float* gate, int64_t n) {
  for (int64_t i = 0; i < n; i += 8)
    store_tail(y + i, n - i,
               _mm256_mul_ps(load_tail(y + i, n - i), sigmoid_ps(load_tail(gate + i, n - i))));
}

}  // namespace invar::kern_avx2
