// Array wrappers around the lane-wise detmath copies, one per ISA (compiled with its flags), so
// the test can compare them with the scalar functions.
#pragma once

#include <cstdint>

namespace invar::test {

enum class LaneFn { exp, sigmoid, silu };

void lanes_avx2(LaneFn fn, const float* x, float* y, int64_t n);    // n multiple of 8
void lanes_avx512(LaneFn fn, const float* x, float* y, int64_t n);  // n multiple of 16

}  // namespace invar::test
