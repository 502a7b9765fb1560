// Entry points of the AVX2 and AVX-512 kernel variants (files *_avx2.cpp / *_avx512.cpp). The
// public headers dispatch to these on simd_active(); every one computes the same bits as the
// scalar reference beside it. Private to src/kernels.
#pragma once

#include <cstdint>

#include "kernels/attention.h"
#include "kernels/delta_rule.h"

namespace invar {

#define INVAR_KERNELS_ISA_DECLS                                                                  \
  float reduce_sum(const float* x, int64_t n);                                                   \
  float reduce_sum_sq(const float* x, int64_t n);                                                \
  float reduce_dot(const float* a, const float* b, int64_t n);                                   \
  /* y[N] = exp(x − mx) (det_exp lane-wise); returns the canonical Σ y. */                       \
  float exp_sub_sum(const float* x, int64_t n, float mx, float* y);                              \
  void rmsnorm_rows(const float* x, const float* w, int64_t m, int64_t n, float eps, float* y);  \
  void l2norm_rows(const float* x, int64_t m, int64_t n, float eps, float* y);                   \
  void rmsnorm_gated_rows(const float* x, const float* w, const float* z, int64_t m, int64_t n,  \
                          float eps, float* y);                                                  \
  void conv1d_silu(const float* x, const float* w, float* state, int64_t t, int64_t c,           \
                   int64_t kc, float* y);                                                        \
  /* Value heads [h0, h1) over all tokens. */                                                    \
  void delta_rule_heads(const DeltaRuleShape& s, float* state, const float* q, const float* k,   \
                        const float* v, const float* g, const float* beta, float* o, int64_t h0, \
                        int64_t h1);                                                             \
  /* Query/head pairs i = t·H + h in [i0, i1); scores: scratch of ≥ pos0 + T floats. */          \
  void attention_pairs(const AttentionShape& s, const KvView& kv, const float* q, float* o,      \
                       int64_t i0, int64_t i1, float* scores);                                   \
  void swiglu(const float* gate, const float* up, int64_t n, float* y);                          \
  void sigmoid_mul_inplace(float* y, const float* gate, int64_t n);

namespace kern_avx2 {
INVAR_KERNELS_ISA_DECLS
}
namespace kern_avx512 {
INVAR_KERNELS_ISA_DECLS
}

#undef INVAR_KERNELS_ISA_DECLS

}  // namespace invar
