// AVX-512 row norms: the same per-row scale as norm.cpp (scalar math on the canonical sum), then
// the per-element products 16 lanes at a time.
#include <cmath>

#include "core/detmath.h"
#include "core/detmath_simd.h"
#include "kernels/kernels_isa.h"
#include "kernels/reduce_simd.h"

namespace invar::kern_avx512 {

using namespace simd512;

void rmsnorm_rows(const float* x, const float* w, int64_t m, int64_t n, float eps, float* y) {
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    const float mean = reduce_sum_sq(xr, n) / float(n);
    const __m512 sc = _mm512_set1_ps(det_rsqrt(mean + eps));
    for (int64_t i = 0; i < n; i += 16)
      store_tail(
          yr + i, n - i,
          _mm512_mul_ps(_mm512_mul_ps(load_tail(xr + i, n - i), sc), load_tail(w + i, n - i)));
  }
}

void l2norm_rows(const float* x, int64_t m, int64_t n, float eps, float* y) {
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    const float norm = std::sqrt(reduce_sum_sq(xr, n));
    const __m512 sc = _mm512_set1_ps(1.0f / (norm > eps ? norm : eps));
    for (int64_t i = 0; i < n; i += 16)
      store_tail(yr + i, n - i, _mm512_mul_ps(load_tail(xr + i, n - i), sc));
  }
}

void rmsnorm_gated_rows(const float* x, const float* w, const float* z, int64_t m, int64_t n,
                        float eps, float* y) {
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = x + r * n;
    const float* zr = z + r * n;
    float* yr = y + r * n;
    const float mean = reduce_sum_sq(xr, n) / float(n);
    const __m512 sc = _mm512_set1_ps(det_rsqrt(mean + eps));
    for (int64_t i = 0; i < n; i += 16) {
      const __m512 v =
          _mm512_mul_ps(_mm512_mul_ps(load_tail(xr + i, n - i), sc), load_tail(w + i, n - i));
      store_tail(yr + i, n - i, _mm512_mul_ps(v, silu_ps(load_tail(zr + i, n - i))));
    }
  }
}

}  // namespace invar::kern_avx512
