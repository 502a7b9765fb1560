// Private to the matmul kernels: the `--activations q8` profile (core/activations.h,
// docs/numerics.md "The q8 profile"). Each activation row is quantised to 8-bit codes per block,
// and the product with Q4_K, Q5_K, Q6_K and Q8_0 weights is a sum of exact integer dot products
// scaled in a fixed float order. Other weight types keep F32 activations under the profile.
//
// Quantisation of one block of B activations x[0..B) (B = 256 for the K-quants, 32 for Q8_0):
//     a = max |x_j| (compared as bit patterns of |x_j|: order-free, NaN above Inf)
//     a < 2^-64 (zero included):  d = 0, q_j = 0
//     a not finite:               d = NaN, q_j = 0
//     else:                       i = 127 / a;  d = a / 127;  q_j = rne(x_j · i)  (|q_j| ≤ 127)
// plus, for B = 256, s[g] = Σ q_j over each 16 codes (int16), which the K-quants' mins and Q6_K's
// offset of 32 need.
//
// Canonical order of output (m, n), everything integer exact, then IEEE float operations:
//   K-quants, superblock b = 0, 1, … of row n in ascending order, acc = +0:
//     Q4_K, Q5_K: is = Σ_s sc_s · Σ_{j∈s} q_j·x_j,  im = Σ_s m_s · (x-sum of sub-block s)
//                 t = fma(−(dmin·dx), float(im), (d·dx) · float(is))
//     Q6_K:       is = Σ_s sc_s · Σ_{j∈s} (q_j − 32)·x_j;  t = (d·dx) · float(is)
//     acc = acc + t;  y = acc
//   Q8_0, block b of 32 (8 lanes, block b into lane b mod 8, lanes from +0):
//     is = Σ_j q_j·x_j;  lane = lane + (d·dx) · float(is);  y = ((l0+l4)+(l2+l6)) +
//     ((l1+l5)+(l3+l7))
// with d, dmin the weight block's F16 scales widened, dx the activation block's scale. It depends
// on K only: not on M, the thread count or the ISA.
#pragma once

#include <cstdint>

#include "core/simd.h"
#include "kernels/matmul/f32_act.h"
#include "quant/dtype.h"

namespace invar {

enum class Q8Format {
  none,  // the weight type keeps F32 activations
  k256,  // blocks of 256 with 16-code sums (Q4_K, Q5_K, Q6_K)
  b32,   // blocks of 32 (Q8_0)
};
Q8Format q8_format_of(DType weight_type);
inline int64_t q8_block(Q8Format f) {
  return f == Q8Format::k256 ? 256 : 32;
}

// m activation rows of K, quantised: views into one buffer (q8_rows_bytes).
struct Q8Rows {
  Q8Format format = Q8Format::none;
  int64_t m = 0, k = 0;
  int8_t* q = nullptr;        // [m][K] codes
  float* d = nullptr;         // [m][K / block] scales
  int16_t* sums = nullptr;    // [m][K / 16] sums of 16 codes (k256 only)
  int16_t* sums32 = nullptr;  // [m][K / 32] sums of 32 codes, the K-quants' sub-blocks (k256)
  const int8_t* row_q(int64_t r) const { return q + r * k; }
  const float* row_d(int64_t r) const { return d + r * (k / q8_block(format)); }
  const int16_t* row_sums(int64_t r) const { return sums + r * (k / 16); }
  const int16_t* row_sums32(int64_t r) const { return sums32 + r * (k / 32); }
};
int64_t q8_rows_bytes(Q8Format f, int64_t m, int64_t k);
// Lays out m × k rows in `buffer` (q8_rows_bytes bytes, 64-byte aligned).
Q8Rows q8_rows_at(void* buffer, Q8Format f, int64_t m, int64_t k);

// Rows [r0, r1) of x[m][K] into `out`, one quantiser for all: each block through
// `block(x, n, q)` (returns its scale), then for k256 each superblock's code sums through
// `sums(q, s16, s32)`.
template <class BlockFn, class SumsFn>
void q8_quantize_rows(const float* x, const Q8Rows& out, int64_t r0, int64_t r1, BlockFn&& block,
                      SumsFn&& sums) {
  const int64_t bs = q8_block(out.format);
  for (int64_t r = r0; r < r1; ++r) {
    int8_t* q = out.q + r * out.k;
    float* d = out.d + r * (out.k / bs);
    for (int64_t b = 0; b < out.k / bs; ++b)
      d[b] = block(x + r * out.k + b * bs, int(bs), q + b * bs);
    if (out.format != Q8Format::k256) continue;
    for (int64_t b = 0; b < out.k / 256; ++b)
      sums(q + 256 * b, out.sums + r * (out.k / 16) + 16 * b,
           out.sums32 + r * (out.k / 32) + 8 * b);
  }
}

// The scalar references: rows [r0, r1) of x[m][K] into `out`; outputs [n0, n1) of every row.
void q8_quantize_ref(const float* x, const Q8Rows& out, int64_t r0, int64_t r1);
void q8matmul_ref_range(const QuantView& w, const Q8Rows& x, float* y, int64_t n0, int64_t n1);

// The SIMD versions, bit for bit the references (q8_act_simd.h).
struct Q8Kernels {
  void (*quantize)(const float* x, const Q8Rows& out, int64_t r0, int64_t r1);
  // scratch: kQScratchFloats floats, where Q8_0's prefill transposes its operands; nullptr sends
  // Q8_0 down the decode kernel (the same bits, slower).
  void (*rows)(const QuantView& w, const Q8Rows& x, float* y, int64_t n0, int64_t n1,
               float* scratch);
};
extern const Q8Kernels kQ8KernelsAvx2;
extern const Q8Kernels kQ8KernelsAvx512;
// The table of `level`; nullptr for the scalar references.
const Q8Kernels* q8_kernels(SimdLevel level = simd_active());

}  // namespace invar
