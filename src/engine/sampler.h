// Token selection (rule N6): greedy, temperature / top-k / top-p with a counter-based RNG keyed
// by (seed, position) — a request's draws never depend on the batch or on other requests — and
// top-K logprobs in the deterministic order (value desc, id asc).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/request.h"

namespace invar {

// splitmix64 of (seed, position): the counter-based generator.
uint64_t sample_bits(uint64_t seed, int64_t position);
// Uniform in [0, 1) with 53 random bits.
double sample_uniform(uint64_t seed, int64_t position);

// Buffers reused across calls (sized to the vocabulary on first use).
struct SamplerScratch {
  std::vector<int32_t> ids;
  std::vector<float> vals;
  std::vector<float> logprobs;
  std::vector<uint32_t> keys, keys_tmp;  // the ranked head's rank keys
  std::vector<uint32_t> digit_counts;    // the radix sort's histograms
  std::vector<double> cum;               // running sums of the ranked weights
};

// Chooses the token at `position` from logits[n_vocab]: the token sample_token_ref chooses, bit
// for bit, at the cost of three passes over the row (max, candidates, the drawn id) and a radix
// sort of the candidates whose weight can still move a sum: few when the top logits stand far
// above the rest, every id when the row's bulk lies within ~38·T of its max.
int32_t sample_token(const float* logits, int64_t n_vocab, const SamplingParams& p,
                     int64_t position, SamplerScratch& s);
// The definition: every candidate ranked (value desc, id asc, a heap sort of the whole row),
// weights e^((l − l_max)/T) in rank order, then min-p, top-p and the draw over double sums taken
// in rank order.
int32_t sample_token_ref(const float* logits, int64_t n_vocab, const SamplingParams& p,
                         int64_t position, SamplerScratch& s);

// log_softmax of logits[n_vocab]: the logprob of `token` and the k best candidates.
void logprobs_top(const float* logits, int64_t n_vocab, int32_t token, int64_t k, SamplerScratch& s,
                  float* token_logprob, std::vector<TokenLogprob>* top);

}  // namespace invar
