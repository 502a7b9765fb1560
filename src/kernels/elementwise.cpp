// Element-wise ops. add/scale_add are plain IEEE ops per element (any vectorisation the compiler
// picks gives the same bits); swiglu and the sigmoid gate need det_exp and dispatch to the
// lane-wise SIMD copies.
#include "kernels/elementwise.h"

#include "core/detmath.h"
#include "core/simd.h"
#include "kernels/kernels_isa.h"

namespace invar {

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] + x[i];
}

void scale_add_inplace(float* y, const float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float p = s * x[i];
    y[i] = y[i] + p;
  }
}

void swiglu(const float* gate, const float* up, int64_t n, float* y) {
  switch (simd_active()) {
    case SimdLevel::avx512:
      return kern_avx512::swiglu(gate, up, n, y);
    case SimdLevel::avx2:
      return kern_avx2::swiglu(gate, up, n, y);
    default:
      for (int64_t i = 0; i < n; ++i) y[i] = det_silu(gate[i]) * up[i];
  }
}

void sigmoid_mul_inplace(float* y, const float* gate, int64_t n) {
  switch (simd_active()) {
    case SimdLevel::avx512:
      return kern_avx512::sigmoid_mul_inplace(y, gate, n);
    case SimdLevel::avx2:
      return kern_avx2::sigmoid_mul_inplace(y, gate, n);
    default:
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] * det_sigmoid(gate[i]);
  }
}

}  // namespace invar
