// AVX2 canonical reductions: lanes 0..7 of reduce.h in one register, lanes 8..15 in another.
#include "core/detmath_simd.h"
#include "kernels/kernels_isa.h"
#include "kernels/reduce_simd.h"

namespace invar::kern_avx2 {

using namespace simd256;

float reduce_sum(const float* x, int64_t n) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    lo = _mm256_add_ps(lo, _mm256_loadu_ps(x + i));
    hi = _mm256_add_ps(hi, _mm256_loadu_ps(x + i + 8));
  }
  if (i < n) {
    lo = _mm256_add_ps(lo, load_tail(x + i, n - i));
    hi = _mm256_add_ps(hi, load_tail(x + i + 8, n - i - 8));
  }
  return tree16(lo, hi);
}

float reduce_sum_sq(const float* x, int64_t n) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    lo = _mm256_add_ps(lo, _mm256_mul_ps(a, a));
    hi = _mm256_add_ps(hi, _mm256_mul_ps(b, b));
  }
  if (i < n) {
    const __m256 a = load_tail(x + i, n - i), b = load_tail(x + i + 8, n - i - 8);
    lo = _mm256_add_ps(lo, _mm256_mul_ps(a, a));
    hi = _mm256_add_ps(hi, _mm256_mul_ps(b, b));
  }
  return tree16(lo, hi);
}

float reduce_dot(const float* a, const float* b, int64_t n) {
  return dot16(a, b, n);
}

float exp_sub_sum(const float* x, int64_t n, float mx, float* y) {
  const __m256 m = _mm256_set1_ps(mx);
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
    _mm256_storeu_ps(y + i, e);
    acc[(i / 8) & 1] = _mm256_add_ps(acc[(i / 8) & 1], e);
  }
  if (i < n) {
    const __m256 e = _mm256_and_ps(exp_ps(_mm256_sub_ps(load_tail(x + i, n - i), m)),
                                   _mm256_castsi256_ps(tail_mask(n - i)));
    store_tail(y + i, n - i, e);
    acc[(i / 8) & 1] = _mm256_add_ps(acc[(i / 8) & 1], e);
  }
  return tree16(acc[0], acc[1]);
}

}  // namespace invar::kern_avx2
