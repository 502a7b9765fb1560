// Prompt-lookup drafts: the sequence's own text predicts its continuation. The longest suffix of
// n tokens (ngram_max down to ngram_min) that occurred earlier in the prompt or the generated
// text proposes what followed its latest earlier occurrence. Needs no weights.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/drafter.h"

namespace invar {

// Up to max_k drafts for `tokens` into out (cleared first). When the continuation reaches the
// end of the text it wraps onto the drafts themselves, so a loop of period p keeps proposing
// itself.
void ngram_propose(std::span<const int32_t> tokens, int64_t ngram_min, int64_t ngram_max,
                   int64_t max_k, std::vector<int32_t>& out);

class NgramDrafter : public Drafter {
 public:
  explicit NgramDrafter(const DrafterConfig& cfg) : cfg_(cfg) {}
  std::string_view name() const override { return "ngram"; }
  std::unique_ptr<DraftSeq> seq_make(std::span<const int32_t> prompt) override;
  void propose(std::span<DraftJob> jobs, ThreadPool& pool) override;

 private:
  DrafterConfig cfg_;
};

}  // namespace invar
