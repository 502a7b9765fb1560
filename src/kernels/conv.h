// Causal depthwise convolution of the Gated DeltaNet input, with state, followed by SiLU:
//   win[c] = state[c] ++ [x[t][c]];  y[t][c] = silu(Σ_{j<Kc} win[c][j]·w[c][j]);  state = win[1:]
// Token-sequential; the same operations for a token in any chunk (rule N4).
#pragma once

#include <cstdint>

#include "core/thread_pool.h"

namespace invar {

// x[T][C] inputs, w[C][Kc] weights (GGUF {Kc, C}), state[Kc−1][C] (row 0 = oldest input),
// y[T][C] outputs. The sum over j runs j = 0..Kc−1 in order (FMA chain starting from 0).
void conv1d_silu(const float* x, const float* w, float* state, int64_t t, int64_t c, int64_t kc,
                 float* y);
// The same with the channels split across the pool's threads in runs of 16 (channels are
// independent: rule N2).
void conv1d_silu(const float* x, const float* w, float* state, int64_t t, int64_t c, int64_t kc,
                 float* y, ThreadPool& pool);
void conv1d_silu_ref(const float* x, const float* w, float* state, int64_t t, int64_t c, int64_t kc,
                     float* y);

}  // namespace invar
