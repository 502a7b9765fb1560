// Element-wise ops of the forward pass. No reductions, so any order gives the same bits as
// long as each element uses the same operations (det_* functions, no contraction).
#pragma once

#include <cstdint>

namespace invar {

void add_inplace(float* y, const float* x, int64_t n);                 // y += x
void swiglu(const float* gate, const float* up, int64_t n, float* y);  // y = silu(gate) * up
void sigmoid_mul_inplace(float* y, const float* gate, int64_t n);      // y *= sigmoid(gate)
void scale_add_inplace(float* y, const float* x, float s, int64_t n);  // y += s * x (mul, then add)

}  // namespace invar
