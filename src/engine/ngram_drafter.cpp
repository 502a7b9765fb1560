#include "engine/ngram_drafter.h"

#include <algorithm>

namespace invar {

void ngram_propose(std::span<const int32_t> tokens, int64_t ngram_min, int64_t ngram_max,
                   int64_t max_k, std::vector<int32_t>& out) {
  out.clear();
  const auto L = static_cast<int64_t>(tokens.size());
  for (int64_t n = std::min(ngram_max, L - 1); n >= std::max<int64_t>(ngram_min, 1); --n) {
    const int32_t* suffix = tokens.data() + (L - n);
    // Latest earlier occurrence: starts i < L − n.
    for (int64_t i = L - n - 1; i >= 0; --i) {
      if (!std::equal(suffix, suffix + n, tokens.data() + i)) continue;
      for (int64_t j = 0; j < max_k; ++j) {
        const int64_t src = i + n + j;  // < L + j, so a wrapped source is an earlier draft
        out.push_back(src < L ? tokens[static_cast<size_t>(src)]
                              : out[static_cast<size_t>(src - L)]);
      }
      return;
    }
  }
}

std::unique_ptr<DraftSeq> NgramDrafter::seq_make(std::span<const int32_t> prompt) {
  (void)prompt;
  return std::make_unique<DraftSeq>();
}

void NgramDrafter::propose(std::span<DraftJob> jobs, ThreadPool& pool) {
  (void)pool;
  for (DraftJob& j : jobs) ngram_propose(j.tokens, cfg_.ngram_min, cfg_.ngram_max, j.max_k, *j.out);
}

}  // namespace invar
