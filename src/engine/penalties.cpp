#include "engine/penalties.h"

#include <algorithm>

#include "core/error.h"

namespace invar {

bool penalties_active(const SamplingParams& p) {
  return !p.logit_bias.empty() || p.repetition_penalty != 1.0f || p.frequency_penalty != 0.0f ||
         p.presence_penalty != 0.0f;
}

const float* penalties_apply(const float* logits, int64_t n_vocab, const SamplingParams& p,
                             std::span<const int32_t> tokens, int64_t n_prompt, PenaltyScratch& s) {
  if (!penalties_active(p)) return logits;
  const auto V = static_cast<size_t>(n_vocab);
  s.row.assign(logits, logits + V);
  for (const auto& [id, bias] : p.logit_bias) {
    INVAR_CHECK(id >= 0 && id < n_vocab);
    s.row[static_cast<size_t>(id)] += bias;
  }
  const auto L = static_cast<int64_t>(tokens.size());
  // Repetition (CTRL's rule, as vLLM and llama.cpp apply it): once per distinct token of the
  // window, whatever its count. -1: the whole sequence; 0: no window.
  if (p.repetition_penalty != 1.0f && p.repetition_last_n != 0) {
    const int64_t from =
        p.repetition_last_n < 0 ? 0 : std::max<int64_t>(0, L - p.repetition_last_n);
    const float r = p.repetition_penalty;
    s.seen.resize(V, 0);
    for (int64_t i = from; i < L; ++i) {
      const int32_t t = tokens[static_cast<size_t>(i)];
      INVAR_CHECK(t >= 0 && t < n_vocab);
      if (s.seen[static_cast<size_t>(t)]) continue;
      s.seen[static_cast<size_t>(t)] = 1;
      s.touched.push_back(t);
      float& l = s.row[static_cast<size_t>(t)];
      l = l > 0.0f ? l / r : l * r;
    }
    for (const int32_t t : s.touched) s.seen[static_cast<size_t>(t)] = 0;
    s.touched.clear();
  }
  // Frequency and presence count the generated tokens only (vLLM's output_bin_counts).
  if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
    s.counts.resize(V, 0);
    for (int64_t i = std::min(n_prompt, L); i < L; ++i) {
      const int32_t t = tokens[static_cast<size_t>(i)];
      INVAR_CHECK(t >= 0 && t < n_vocab);
      if (s.counts[static_cast<size_t>(t)]++ == 0) s.touched.push_back(t);
    }
    for (const int32_t t : s.touched) {
      float& l = s.row[static_cast<size_t>(t)];
      l -= p.frequency_penalty * static_cast<float>(s.counts[static_cast<size_t>(t)]);
      l -= p.presence_penalty;
      s.counts[static_cast<size_t>(t)] = 0;
    }
    s.touched.clear();
  }
  return s.row.data();
}

}  // namespace invar
