// AVX2 attention: the steps of attention.cpp with the dot products, exponentials and the
// V accumulation 8 lanes wide.
#include "kernels/kernels_isa.h"
#include "kernels/reduce_simd.h"

namespace invar::kern_avx2 {

using namespace simd256;

void attention_pairs(const AttentionShape& s, const KvView& kv, const float* q, float* o,
                     int64_t i0, int64_t i1, float* scores) {
  const int64_t group = s.h / s.hkv;
  const int64_t dd = s.d;
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t t = i / s.h, h = i % s.h;
    const int64_t g = h / group;
    const int64_t n = s.pos0 + t + 1;
    const float* qv = q + i * dd;
    float* ov = o + i * dd;
    for (int64_t p = 0; p < n; ++p) {
      const float* kr = kv.k_blocks[p / kv.block_size] + (p % kv.block_size) * kv.row_stride + g * dd;
      scores[p] = dot16(qv, kr, dd) * s.scale;
    }
    float mx = -__builtin_inff();
    for (int64_t p = 0; p < n; ++p)
      if (scores[p] > mx) mx = scores[p];
    const float sum = exp_sub_sum(scores, n, mx, scores);
    for (int64_t d = 0; d < dd; d += 8) store_tail(ov + d, dd - d, _mm256_setzero_ps());
    for (int64_t p = 0; p < n; ++p) {
      const float* vr = kv.v_blocks[p / kv.block_size] + (p % kv.block_size) * kv.row_stride + g * dd;
      const __m256 e = _mm256_set1_ps(scores[p]);
      for (int64_t d = 0; d < dd; d += 8)
        store_tail(ov + d, dd - d,
                   _mm256_fmadd_ps(e, load_tail(vr + d, dd - d), load_tail(ov + d, dd - d)));
    }
    const __m256 sv = _mm256_set1_ps(sum);
    for (int64_t d = 0; d < dd; d += 8)
      store_tail(ov + d, dd - d, _mm256_div_ps(load_tail(ov + d, dd - d), sv));
  }
}

}  // namespace invar::kern_avx2
