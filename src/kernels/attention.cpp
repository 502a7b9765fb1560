// Causal GQA attention: scalar reference and dispatch. For each (query t, head h), in order:
//   score[s] = (Σ_d q[d]·K[s][d]) · scale        s = 0..p, canonical dot (reduce.h)
//   mx       = max_s score[s]                    (order-free)
//   e[s]     = det_exp(score[s] − mx);  sum = canonical Σ_s e[s]
//   acc[d]   = fma(e[s], V[s][d], acc[d])        s = 0..p in order, from 0
//   o[d]     = acc[d] / sum
// Every step depends only on p and the KV rows 0..p, never on the other queries in the call.
#include "kernels/attention.h"

#include <cmath>
#include <vector>

#include "core/detmath.h"
#include "core/error.h"
#include "kernels/kernels_isa.h"
#include "kernels/reduce.h"

namespace invar {
namespace {

void check_shape(const AttentionShape& s, const KvView& kv) {
  INVAR_CHECK(s.n_tokens >= 0 && s.pos0 >= 0 && s.h > 0 && s.hkv > 0 && s.d > 0 && s.n_keys >= 0,
              "attention: bad shape");
  INVAR_CHECK(s.h % s.hkv == 0, "attention: H must be a multiple of Hkv");
  INVAR_CHECK(kv.block_size > 0 && kv.row_stride >= s.hkv * s.d, "attention: bad KV view");
}

void attention_pairs_ref(const AttentionShape& s, const KvView& kv, const float* q, float* o,
                         int64_t i0, int64_t i1, float* scores) {
  const int64_t group = s.h / s.hkv;
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t t = i / s.h, h = i % s.h;
    const int64_t g = h / group;
    const int64_t n = s.n_keys > 0 ? s.n_keys : s.pos0 + t + 1;
    const float* qv = q + i * s.d;
    float* ov = o + i * s.d;
    for (int64_t p = 0; p < n; ++p) {
      const float* kr =
          kv.k_blocks[p / kv.block_size] + (p % kv.block_size) * kv.row_stride + g * s.d;
      scores[p] = reduce_dot_ref(qv, kr, s.d) * s.scale;
    }
    float mx = -__builtin_inff();
    for (int64_t p = 0; p < n; ++p)
      if (scores[p] > mx) mx = scores[p];
    for (int64_t p = 0; p < n; ++p) scores[p] = det_exp(scores[p] - mx);
    const float sum = reduce_sum_ref(scores, n);
    for (int64_t d = 0; d < s.d; ++d) ov[d] = 0.0f;
    for (int64_t p = 0; p < n; ++p) {
      const float* vr =
          kv.v_blocks[p / kv.block_size] + (p % kv.block_size) * kv.row_stride + g * s.d;
      const float e = scores[p];
      for (int64_t d = 0; d < s.d; ++d) ov[d] = std::fma(e, vr[d], ov[d]);
    }
    for (int64_t d = 0; d < s.d; ++d) ov[d] = ov[d] / sum;
  }
}

// Keys a call reduces over at most.
int64_t context_of(const AttentionShape& s) {
  return s.n_keys > 0 ? s.n_keys : s.pos0 + s.n_tokens;
}

}  // namespace

void attention_ref(const AttentionShape& s, const KvView& kv, const float* q, float* o) {
  check_shape(s, kv);
  std::vector<float> scores(size_t(context_of(s)));
  attention_pairs_ref(s, kv, q, o, 0, s.n_tokens * s.h, scores.data());
}

int64_t attention_scratch_floats(int64_t context, int64_t d, int n_threads) {
  // The scalar path needs `context` floats a thread, the SIMD path a tile's scores and
  // accumulators.
  return kAttnHeadTile * (context + d) * n_threads;
}

void attention(const AttentionShape& s, const KvView& kv, const float* q, float* o,
               ThreadPool& pool, std::span<float> scratch) {
  check_shape(s, kv);
  const int64_t per_thread = attention_scratch_floats(context_of(s), s.d, 1);
  INVAR_CHECK(int64_t(scratch.size()) >= per_thread * pool.size(),
              "attention: scratch of " + std::to_string(scratch.size()) + " floats, needs " +
                  std::to_string(per_thread * pool.size()));
  const IsaKernels* isa = isa_kernels();
  if (!isa) {
    pool.parallel_for(s.n_tokens * s.h, [&](int64_t i0, int64_t i1, int ti) {
      attention_pairs_ref(s, kv, q, o, i0, i1, scratch.data() + ti * per_thread);
    });
    return;
  }
  pool.parallel_for(attention_unit_count(s), [&](int64_t u0, int64_t u1, int ti) {
    isa->attention_units(s, kv, q, o, u0, u1, scratch.data() + ti * per_thread);
  });
}

void attention(const AttentionShape& s, const KvView& kv, const float* q, float* o,
               ThreadPool& pool) {
  const int64_t need = attention_scratch_floats(context_of(s), s.d, pool.size());
  std::vector<float> scratch(static_cast<size_t>(need));
  attention(s, kv, q, o, pool, scratch);
}

}  // namespace invar
