// AVX-512 canonical reductions: the 16 lanes of reduce.h are the 16 lanes of one register.
#include "core/detmath_simd.h"
#include "kernels/kernels_isa.h"
#include "kernels/reduce_simd.h"

namespace invar::kern_avx512 {

using namespace simd512;

float reduce_sum(const float* x, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) acc = _mm512_add_ps(acc, _mm512_loadu_ps(x + i));
  if (i < n) acc = _mm512_add_ps(acc, load_tail(x + i, n - i));
  return tree16(acc);
}

float reduce_sum_sq(const float* x, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    acc = _mm512_add_ps(acc, _mm512_mul_ps(v, v));
  }
  if (i < n) {
    const __m512 v = load_tail(x + i, n - i);
    acc = _mm512_add_ps(acc, _mm512_mul_ps(v, v));
  }
  return tree16(acc);
}

float reduce_dot(const float* a, const float* b, int64_t n) {
  return dot16(a, b, n);
}

float exp_sub_sum(const float* x, int64_t n, float mx, float* y) {
  const __m512 m = _mm512_set1_ps(mx);
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = exp_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), m));
    _mm512_storeu_ps(y + i, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (i < n) {
    const __mmask16 k = tail_mask(n - i);
    const __m512 e =
        _mm512_maskz_mov_ps(k, exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), m)));
    _mm512_mask_storeu_ps(y + i, k, e);
    acc = _mm512_add_ps(acc, e);
  }
  return tree16(acc);
}

}  // namespace invar::kern_avx512
