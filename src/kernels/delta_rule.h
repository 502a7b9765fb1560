// The Gated DeltaNet delta rule, token-sequential (rule N4), state in F32:
//   for each token t, value head h (k-head kh = map(h)):
//     S_h *= exp(g[t][h])
//     d    = β[t][h] · (v[t][h] − S_h · k[t][kh])
//     S_h += d ⊗ k[t][kh]
//     o[t][h] = (S_h · q[t][kh]) / sqrt(Dk)
// S_h is [Dv][Dk] (row j = value index), i.e. ggml's layout. The dot products over Dk use the
// canonical row reduction (reduce.h). Threads split value heads (outputs).
#pragma once

#include <cstdint>

#include "core/thread_pool.h"

namespace invar {

struct DeltaRuleShape {
  int64_t n_tokens;  // [T]
  int64_t hk;        // [Hk] key heads
  int64_t hv;        // [Hv] value heads
  int64_t dk;        // [Dk]
  int64_t dv;        // [Dv]
  bool tiled;        // k-head of v-head h: tiled → h % Hk (qwen35*), else h / (Hv/Hk) (qwen3next)
};

// state[Hv][Dv][Dk] in/out; q,k [T][Hk][Dk] (already L2-normalised); v [T][Hv][Dv];
// g [T][Hv] (log decay, ≤ 0); beta [T][Hv]; o [T][Hv][Dv].
void delta_rule(const DeltaRuleShape& s, float* state, const float* q, const float* k,
                const float* v, const float* g, const float* beta, float* o, ThreadPool& pool);
void delta_rule_ref(const DeltaRuleShape& s, float* state, const float* q, const float* k,
                    const float* v, const float* g, const float* beta, float* o);

}  // namespace invar
