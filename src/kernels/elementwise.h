// Element-wise ops of the forward pass. No reductions, so any order gives the same bits as
// long as each element uses the same operations (det_* functions, no contraction).
#pragma once

#include <cstdint>

namespace invar {

void add_inplace(float* y, const float* x, int64_t n);                 // y += x
void swiglu(const float* gate, const float* up, int64_t n, float* y);  // y = silu(gate) * up
void sigmoid_mul_inplace(float* y, const float* gate, int64_t n);      // y *= sigmoid(gate)
void scale_add_inplace(float* y, const float* x, float s, int64_t n);  // y += s * x (mul, then add)

// GELU, tanh form (gelu_pytorch_tanh): 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³))), computed as
// x · sigmoid(2√(2/π)(x + 0.044715x³)), the same function (½(1 + tanh u) = sigmoid(2u)).
void gelu_tanh(const float* x, int64_t n, float* y);
// GELU, erf form (nn.GELU()): 0.5·x·(1 + erf(x/√2)).
void gelu_erf(const float* x, int64_t n, float* y);

}  // namespace invar
