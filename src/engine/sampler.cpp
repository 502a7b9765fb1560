#include "engine/sampler.h"

#include <algorithm>

#include "core/detmath.h"
#include "core/error.h"
#include "kernels/select.h"

namespace invar {

uint64_t sample_bits(uint64_t seed, int64_t position) {
  // Two rounds of the splitmix64 finaliser: seed and position both fully diffused.
  auto mix = [](uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  return mix(mix(seed) ^ static_cast<uint64_t>(position));
}

double sample_uniform(uint64_t seed, int64_t position) {
  return static_cast<double>(sample_bits(seed, position) >> 11) * 0x1.0p-53;
}

int32_t sample_token(const float* logits, int64_t n_vocab, const SamplingParams& p,
                     int64_t position, SamplerScratch& s) {
  s.ids.resize(static_cast<size_t>(n_vocab));
  s.vals.resize(static_cast<size_t>(n_vocab));
  if (p.temperature <= 0.0f) {
    top_k(logits, n_vocab, 1, s.ids.data(), s.vals.data());
    return s.ids[0];
  }
  const int64_t k = p.top_k > 0 ? std::min(p.top_k, n_vocab) : n_vocab;
  top_k(logits, n_vocab, k, s.ids.data(), s.vals.data());  // best first, ties by smaller id
  // Weights e^((l_i − l_max)/T) accumulated in candidate order (a fixed order, rule N1).
  const float best = s.vals[0];
  double total = 0;
  for (int64_t i = 0; i < k; ++i) {
    const float w = det_exp((s.vals[static_cast<size_t>(i)] - best) / p.temperature);
    s.vals[static_cast<size_t>(i)] = w >= 0.0f ? w : 0.0f;  // NaN logits weigh nothing
    total += s.vals[static_cast<size_t>(i)];
  }
  // min-p (vLLM's order: before top-p): weights are relative to the best candidate, so a
  // candidate survives when its weight is at least min_p. The ranking is by weight, so the
  // survivors are a head of it.
  int64_t n = k;
  if (p.min_p > 0.0f) {
    double kept_min = 0;
    for (int64_t i = 0; i < k; ++i) {
      if (s.vals[static_cast<size_t>(i)] < p.min_p) {
        n = std::max<int64_t>(i, 1);
        break;
      }
      kept_min += s.vals[static_cast<size_t>(i)];
    }
    if (n < k) total = kept_min;
  }
  // top-p: the shortest head of the ranking whose mass reaches top_p of the total.
  if (p.top_p < 1.0f) {
    const double target = static_cast<double>(p.top_p) * total;
    double cum = 0;
    for (int64_t i = 0; i < n; ++i) {
      cum += s.vals[static_cast<size_t>(i)];
      if (cum >= target) {
        n = i + 1;
        break;
      }
    }
  }
  double kept = 0;
  for (int64_t i = 0; i < n; ++i) kept += s.vals[static_cast<size_t>(i)];
  const double u = sample_uniform(p.seed, position) * kept;
  double cum = 0;
  for (int64_t i = 0; i < n; ++i) {
    cum += s.vals[static_cast<size_t>(i)];
    if (u < cum) return s.ids[static_cast<size_t>(i)];
  }
  return s.ids[static_cast<size_t>(n - 1)];
}

void logprobs_top(const float* logits, int64_t n_vocab, int32_t token, int64_t k, SamplerScratch& s,
                  float* token_logprob, std::vector<TokenLogprob>* top) {
  INVAR_CHECK(token >= 0 && token < n_vocab);
  s.logprobs.resize(static_cast<size_t>(n_vocab));
  log_softmax(logits, n_vocab, s.logprobs.data());
  *token_logprob = s.logprobs[static_cast<size_t>(token)];
  top->clear();
  k = std::min(k, n_vocab);
  if (k <= 0) return;
  s.ids.resize(static_cast<size_t>(k));
  s.vals.resize(static_cast<size_t>(k));
  top_k(s.logprobs.data(), n_vocab, k, s.ids.data(), s.vals.data());
  for (int64_t i = 0; i < k; ++i)
    top->push_back({s.ids[static_cast<size_t>(i)], s.vals[static_cast<size_t>(i)]});
}

}  // namespace invar
