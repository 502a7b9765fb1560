// The canonical row reduction (rule N1), shared by every kernel that sums along a row:
// lane l (0..15) accumulates elements l, l+16, l+32, … in index order; then the 16 lanes are
// combined by the fixed tree  s8[i] = l[i] + l[i+8];  s4[i] = s8[i] + s8[i+4];
// s2[i] = s4[i] + s4[i+2];  total = s2[0] + s2[1].  AVX-512 holds the 16 lanes in one register,
// AVX2 in two, the scalar path in an array: the same additions in the same order.
#pragma once

#include <cstdint>

namespace invar {

// The fixed tree over 16 lane sums l[0..15] (above).
float reduce_lanes_tree(const float* l);
float reduce_sum_ref(const float* x, int64_t n);     // Σ x
float reduce_sum_sq_ref(const float* x, int64_t n);  // Σ x²  (x*x rounded, then added)
float reduce_dot_ref(const float* a, const float* b,
                     int64_t n);  // Σ a·b (product rounded, then added)
// Dispatching versions (simd_active()).
float reduce_sum(const float* x, int64_t n);
float reduce_sum_sq(const float* x, int64_t n);
float reduce_dot(const float* a, const float* b, int64_t n);

}  // namespace invar
