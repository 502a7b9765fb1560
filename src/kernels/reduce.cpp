#include "kernels/reduce.h"

#include "kernels/kernels_isa.h"

namespace invar {
float reduce_lanes_tree(const float* l) {
  float s8[8], s4[4], s2[2];
  for (int i = 0; i < 8; ++i) s8[i] = l[i] + l[i + 8];
  for (int i = 0; i < 4; ++i) s4[i] = s8[i] + s8[i + 4];
  for (int i = 0; i < 2; ++i) s2[i] = s4[i] + s4[i + 2];
  return s2[0] + s2[1];
}

float reduce_sum_ref(const float* x, int64_t n) {
  float l[16] = {};
  for (int64_t i = 0; i < n; ++i) l[i % 16] += x[i];
  return reduce_lanes_tree(l);
}

float reduce_sum_sq_ref(const float* x, int64_t n) {
  float l[16] = {};
  for (int64_t i = 0; i < n; ++i) {
    const float sq = x[i] * x[i];
    l[i % 16] += sq;
  }
  return reduce_lanes_tree(l);
}

float reduce_dot_ref(const float* a, const float* b, int64_t n) {
  float l[16] = {};
  for (int64_t i = 0; i < n; ++i) {
    const float p = a[i] * b[i];
    l[i % 16] += p;
  }
  return reduce_lanes_tree(l);
}

float reduce_sum(const float* x, int64_t n) {
  const IsaKernels* k = isa_kernels();
  return k ? k->reduce_sum(x, n) : reduce_sum_ref(x, n);
}

float reduce_sum_sq(const float* x, int64_t n) {
  const IsaKernels* k = isa_kernels();
  return k ? k->reduce_sum_sq(x, n) : reduce_sum_sq_ref(x, n);
}

float reduce_dot(const float* a, const float* b, int64_t n) {
  const IsaKernels* k = isa_kernels();
  return k ? k->reduce_dot(a, b, n) : reduce_dot_ref(a, b, n);
}

}  // namespace invar
