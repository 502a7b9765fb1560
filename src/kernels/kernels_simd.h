// Private to the kernels: the table of SIMD entry points (kernels_isa.h) for a 16-float vector
// type V. Every body is written once over V (rows_simd.h, delta_rule_simd.h, attention_simd.h,
// f32_act_simd.h, each with the argument for why its bits equal the scalar reference); an ISA
// file only defines V and builds its table here.
#pragma once

#include "kernels/attention_simd.h"
#include "kernels/delta_rule_simd.h"
#include "kernels/kernels_isa.h"
#include "kernels/matmul/f32_act_simd.h"
#include "kernels/rows_simd.h"

namespace invar::kernels_simd {
namespace {

template <class V>
constexpr IsaKernels isa_kernels_over() {
  return {
      .reduce_sum = &reduce_sum<V>,
      .reduce_sum_sq = &reduce_sum_sq<V>,
      .reduce_dot = &reduce_dot<V>,
      .exp_sub_sum = &exp_sub_sum<V>,
      .rmsnorm_rows = &rmsnorm_rows<V>,
      .l2norm_rows = &l2norm_rows<V>,
      .rmsnorm_gated_rows = &rmsnorm_gated_rows<V>,
      .conv1d_silu = &conv1d_silu<V>,
      .delta_rule_heads = &delta_rule_heads<V>,
      .attention_units = &attention_units<V>,
      .swiglu = &swiglu<V>,
      .sigmoid_mul_inplace = &sigmoid_mul_inplace<V>,
      .qmatmul_rows = &qmatmul_tiles::qmatmul_rows<V>,
  };
}

}  // namespace
}  // namespace invar::kernels_simd
