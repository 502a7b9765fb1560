// Causal grouped-query attention over a paged KV history.
//   o[t][h] = Σ_{s ≤ p_t} softmax_s(q[t][h]·K[s][g] · scale) · V[s][g],  g = h / (H/Hkv)
// The query at absolute position p reduces over keys 0..p in position order (rule N4): scores
// for all s, then max, then exp and the canonical sum (reduce.h), then the weighted V sum
// accumulated over s in order for each output lane. Nothing depends on how the queries were
// chunked or on which other queries are in the call.
#pragma once

#include <cstdint>
#include <span>

#include "core/thread_pool.h"

namespace invar {

// Paged history: position s lives in block s / block_size at row s % block_size.
// k_blocks[b] / v_blocks[b] point at [block_size][Hkv][D] floats (rows of row_stride floats,
// row_stride ≥ Hkv·D).
struct KvView {
  const float* const* k_blocks = nullptr;
  const float* const* v_blocks = nullptr;
  int64_t block_size = 0;
  int64_t row_stride = 0;
};

struct AttentionShape {
  int64_t n_tokens;  // [T] queries, at positions pos0 .. pos0+T−1 (all in the KV view already)
  int64_t pos0;
  int64_t h;    // [H]
  int64_t hkv;  // [Hkv]
  int64_t d;    // [D]
  float scale;  // 1/sqrt(D)
  // > 0: bidirectional (the vision tower): every query reduces over keys 0..n_keys−1 in order,
  // whatever its position — the bits the causal kernel gives a query at position n_keys − 1.
  int64_t n_keys = 0;
};

// Floats of working memory attention() needs on a pool of n_threads for queries up to position
// context − 1 (pos0 + T ≤ context) with head size d: scores and accumulators of every thread.
int64_t attention_scratch_floats(int64_t context, int64_t d, int n_threads);

// q[T][H][D] → o[T][H][D]. Threads split queries × heads (outputs; the SIMD path in tiles of one
// KV group's heads that share K/V loads). `scratch` holds at least
// attention_scratch_floats(max(pos0 + T, n_keys), D, pool.size()) floats; the caller sizes it once,
// so the call allocates nothing.
void attention(const AttentionShape& s, const KvView& kv, const float* q, float* o,
               ThreadPool& pool, std::span<float> scratch);
// The same with scratch allocated for this call (tests and tools).
void attention(const AttentionShape& s, const KvView& kv, const float* q, float* o,
               ThreadPool& pool);
void attention_ref(const AttentionShape& s, const KvView& kv, const float* q, float* o);

}  // namespace invar
