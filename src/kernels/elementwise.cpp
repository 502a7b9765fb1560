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

void gelu_tanh(const float* x, int64_t n, float* y) {
  constexpr float kTwoSqrt2OverPi = 1.5957691216057308f;  // 2·√(2/π)
  constexpr float kCubic = 0.044715f;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float v3 = (v * v) * v;
    const float inner = v + kCubic * v3;
    y[i] = v * det_sigmoid(kTwoSqrt2OverPi * inner);
  }
}

void gelu_erf(const float* x, int64_t n, float* y) {
  constexpr float kInvSqrt2 = 0.70710678118654752f;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float half = 0.5f * v;
    y[i] = half * (1.0f + det_erf(v * kInvSqrt2));
  }
}

void sigmoid_mul_inplace(float* y, const float* gate, int64_t n) {
  if (const IsaKernels* k = isa_kernels()) return k->sigmoid_mul_inplace(y, gate, n);
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] * det_sigmoid(gate[i]);
}

}  // namespace invar
