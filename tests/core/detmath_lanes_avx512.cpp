#include "core/detmath_simd.h"
#include "detmath_lanes.h"

namespace invar::test {

void lanes_avx512(LaneFn fn, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __m512 r = fn == LaneFn::exp       ? simd512::exp_ps(v)
                     : fn == LaneFn::sigmoid ? simd512::sigmoid_ps(v)
                                             : simd512::silu_ps(v);
    _mm512_storeu_ps(y + i, r);
  }
}

}  // namespace invar::test
