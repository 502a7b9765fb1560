// Softmax-family reductions and deterministic selection (rule N6): every top-k orders by value
// descending, then id ascending; NaN never selected before a number.
#pragma once

#include <cstdint>

namespace invar {

// y[N] = log_softmax(x): max, then canonical Σ exp(x − max) (reduce.h), then x − max − log(sum).
// y must not alias x.
void log_softmax(const float* x, int64_t n, float* y);
void log_softmax_ref(const float* x, int64_t n, float* y);
// y[N] = softmax(x) with the same canonical sum.
void softmax(const float* x, int64_t n, float* y);

// The k largest of x[N] (k ≤ N): ids[k], vals[k] best first, ties by smaller id.
void top_k(const float* x, int64_t n, int64_t k, int32_t* ids, float* vals);

// MoE router (qwen3next-math.md "MoE"): p = softmax(logits[NE]); the top K by p;
// w_i = p_i / max(Σ p_sel, 6.1035e-5) with the K-term sum taken in selection order.
void moe_route(const float* logits, int64_t n_expert, int64_t k, int32_t* sel, float* w);

}  // namespace invar
