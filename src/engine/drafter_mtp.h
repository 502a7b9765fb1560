// Drafts from the model's own MTP block (Model::mtp_forward), driven as llama.cpp's draft-mtp
// drives it (common/speculative.cpp): the MTP row of position p pairs the trunk's hidden row of
// p − 1 with the token at p and predicts the token at p + 1; its own KV holds every verified
// position, and the k drafts chain through the block, each fed the previous row's hidden_out.
//
// Per sequence the drafter keeps the MTP KV (paged, blocks of kBlock positions, grown on demand)
// and the trunk hidden rows it has observed but not yet consumed. propose() first catches the MTP
// KV up over the verified positions it has not run yet, the last of which (the newest verified
// token) yields the first draft; chained rows then write KV past the verified end, which the next
// catch-up overwrites. Positions the trunk never computed (prefix-cache hits) have no hidden row:
// their MTP rows read zeros, as llama.cpp's first row does. Drafts are the argmax, ties to the
// lowest id; they are deterministic in the inputs and only ever change speed.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "engine/drafter.h"
#include "model/model.h"

namespace invar {

class MtpDrafter : public Drafter {
 public:
  // Throws invar::Error when the model has no usable MTP block.
  explicit MtpDrafter(const Model& model);
  std::string_view name() const override { return "mtp"; }
  bool wants_hidden() const override { return true; }
  std::unique_ptr<DraftSeq> seq_make(std::span<const int32_t> prompt) override;
  void propose(std::span<DraftJob> jobs, ThreadPool& pool) override;
  void hidden_observe(DraftSeq& seq, int64_t pos0, int64_t n, const float* hidden) override;

 private:
  const Model& model_;
  ForwardScratchPtr scratch_;
  std::vector<MtpChunk> chunks_;  // one propose() batch
};

}  // namespace invar
