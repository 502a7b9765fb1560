// Logit bias and the repetition, frequency and presence penalties, applied to a copy of a logits
// row before the sampler selects a token, in vLLM's order (its v1 Sampler: logit bias, then
// apply_penalties: repetition, frequency, presence):
//
//   l[t] += bias[t]                                  for t in logit_bias
//   l[t]  = l[t] > 0 ? l[t] / r : l[t] * r           for t among the last N of prompt + output
//   l[t] -= frequency × count_out(t)                 for t in the output
//   l[t] -= presence                                 for t in the output
//
// each line one float32 operation per token. The result is a pure function of the row, the
// request's sampling parameters and its token sequence (prompt, then generated) — never of the
// batch, the cache or how the tokens were verified — so the contract holds with penalties on:
// the same tokens give the same bits, in plain decoding and in speculative verification alike.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/request.h"

namespace invar {

// Whether any bias or penalty changes a row (else the sampler reads the model's row itself).
bool penalties_active(const SamplingParams& p);

// Buffers reused across calls (sized to the vocabulary on first use). counts stays all zero
// between calls: each call clears the entries it set.
struct PenaltyScratch {
  std::vector<float> row;        // [V] the penalised copy
  std::vector<int32_t> counts;   // [V] occurrences in the output
  std::vector<uint8_t> seen;     // [V] in the repetition window
  std::vector<int32_t> touched;  // ids whose counts / seen entries are set
};

// The row the sampler selects from: `logits` itself when no penalty is active, else the
// penalised copy in s.row. tokens: prompt then generated ones; n_prompt: how many are prompt.
const float* penalties_apply(const float* logits, int64_t n_vocab, const SamplingParams& p,
                             std::span<const int32_t> tokens, int64_t n_prompt, PenaltyScratch& s);

}  // namespace invar
