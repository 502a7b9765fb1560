// Entry points of the AVX2 and AVX-512 kernel variants: one table per ISA, built from the bodies
// written once over a 16-float vector type (kernels_simd.h) in kernels_avx2.cpp and
// kernels_avx512.cpp. The public headers dispatch through isa_kernels(); every entry computes the
// same bits as the scalar reference beside it. Private to src/kernels.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/simd.h"
#include "kernels/attention.h"
#include "kernels/delta_rule.h"

namespace invar {

struct QuantView;

struct IsaKernels {
  float (*reduce_sum)(const float* x, int64_t n);
  float (*reduce_sum_sq)(const float* x, int64_t n);
  float (*reduce_dot)(const float* a, const float* b, int64_t n);
  // y[N] = e^(x − mx) (det_exp lane-wise); returns the canonical Σ y.
  float (*exp_sub_sum)(const float* x, int64_t n, float mx, float* y);
  void (*rmsnorm_rows)(const float* x, const float* w, int64_t m, int64_t n, float eps, float* y);
  void (*l2norm_rows)(const float* x, int64_t m, int64_t n, float eps, float* y);
  void (*rmsnorm_gated_rows)(const float* x, const float* w, const float* z, int64_t m, int64_t n,
                             float eps, float* y);
  // Channels [ch0, ch1) of conv.h's conv1d_silu.
  void (*conv1d_silu)(const float* x, const float* w, float* state, int64_t t, int64_t c,
                      int64_t kc, float* y, int64_t ch0, int64_t ch1);
  // Value heads [h0, h1) over all tokens.
  void (*delta_rule_heads)(const DeltaRuleShape& s, float* state, const float* q, const float* k,
                           const float* v, const float* g, const float* beta, float* o, int64_t h0,
                           int64_t h1);
  // Units [u0, u1) of attention_unit_count(); scores: kAttnHeadTile·(context+D) floats.
  void (*attention_units)(const AttentionShape& s, const KvView& kv, const float* q, float* o,
                          int64_t u0, int64_t u1, float* scores);
  void (*swiglu)(const float* gate, const float* up, int64_t n, float* y);
  void (*sigmoid_mul_inplace)(float* y, const float* gate, int64_t n);
  // f32_act.h (every weight type): outputs [n_begin, n_end) of every row; scratch: kQScratchFloats
  // floats.
  void (*qmatmul_rows)(const QuantView& w, const float* x, int64_t rows, float* y, int64_t n_begin,
                       int64_t n_end, float* scratch);
};

extern const IsaKernels kIsaKernelsAvx2;
extern const IsaKernels kIsaKernelsAvx512;

// The table of the active SIMD level; nullptr when the scalar references run. Each call is one
// kernel call dispatched at that level (simd_count).
inline const IsaKernels* isa_kernels(SimdLevel level = simd_active()) {
  simd_count(level);
  switch (level) {
    case SimdLevel::avx512:
      return &kIsaKernelsAvx512;
    case SimdLevel::avx2:
      return &kIsaKernelsAvx2;
    default:
      return nullptr;
  }
}

// The SIMD attention shares each K/V row load among the query heads of one KV group: a work unit
// is (token t, KV head g, tile of up to kAttnHeadTile of g's query heads). Each head still runs
// exactly the operation sequence of attention.cpp; only the loads are shared.
inline constexpr int64_t kAttnHeadTile = 8;
inline int64_t attention_tiles_per_group(const AttentionShape& s) {
  return (s.h / s.hkv + kAttnHeadTile - 1) / kAttnHeadTile;
}
inline int64_t attention_unit_count(const AttentionShape& s) {
  return s.n_tokens * s.hkv * attention_tiles_per_group(s);
}

// One work unit, decoded: query token t (keys 0..n−1), KV head g, query heads h0 .. h0+nh−1.
struct AttentionUnit {
  int64_t t, g, h0, nh, n;
};
inline AttentionUnit attention_unit(const AttentionShape& s, int64_t u) {
  const int64_t group = s.h / s.hkv;
  const int64_t tiles = attention_tiles_per_group(s);
  AttentionUnit a;
  a.t = u / (s.hkv * tiles);
  a.g = (u / tiles) % s.hkv;
  a.h0 = a.g * group + (u % tiles) * kAttnHeadTile;
  a.nh = std::min(kAttnHeadTile, a.g * group + group - a.h0);
  a.n = s.n_keys > 0 ? s.n_keys : s.pos0 + a.t + 1;
  return a;
}
// Row of position p in a paged K or V history, `off` floats into the row.
inline const float* attention_kv_row(const float* const* blocks, const KvView& kv, int64_t p,
                                     int64_t off) {
  return blocks[p / kv.block_size] + (p % kv.block_size) * kv.row_stride + off;
}

}  // namespace invar
