// Element-wise ops. add/scale_add are plain IEEE ops per element (any vectorisation the compiler
// picks gives the same bits); swiglu and the sigmoid gate need det_exp and dispatch to the
// lane-wise SIMD copies.
#include "kernels/elementwise.h"

#include "core/detmath.h"
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
  if (const IsaKernels* k = isa_kernels()) return k->swiglu(gate, up, n, y);
  for (int64_t i = 0; i < n; ++i) y[i] = det_silu(gate[i]) * up[i];
}

void sigmoid_mul_inplace(float* y, const float* gate, int64_t n) {
  if (const IsaKernels* k = isa_kernels()) return k->sigmoid_mul_inplace(y, gate, n);
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] * det_sigmoid(gate[i]);
}

}  // namespace invar
