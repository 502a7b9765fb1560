#include "core/detmath_simd.h"
#include "detmath_lanes.h"

namespace invar::test {

void lanes_avx2(LaneFn fn, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 r = fn == LaneFn::exp       ? simd256::exp_ps(v)
                     : fn == LaneFn::sigmoid ? simd256::sigmoid_ps(v)
                                             : simd256::silu_ps(v);
    _mm256_storeu_ps(y + i, r);
  }
}

}  // namespace invar::test
