// Joins the memory cache to the lower tiers (lower_tiers.h). Every block the memory cache
// indexes is offered to the tiers, with its checkpoint when it has one; a lookup that memory
// can serve only in part is first extended from the tiers, by committing the blocks read back
// exactly as a computation would have (same keys, same token checks), so the ordinary lookup
// that follows finds them. By the contract the bits read back are the bits the computation
// would produce: a restored prefix cannot change an answer. Blocks that keep a drafter's hidden
// rows (block_hidden.h) travel with them when present; a record without them restores a block
// marked absent (the drafter reads zeros there), never rows of another block.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "cache/block_hidden.h"
#include "cache/lower_tiers.h"
#include "cache/prefix_cache.h"

namespace invar {

class TierBridge {
 public:
  TierBridge(PrefixCache& cache, LowerTiers& tiers);  // starts offering indexed blocks
  ~TierBridge();
  TierBridge(const TierBridge&) = delete;
  TierBridge& operator=(const TierBridge&) = delete;

  // Before cache.lookup(tokens, salt, max_tokens): brings the blocks beyond the memory hit
  // that the tiers hold (up to the last one with a checkpoint) into the memory cache. Waits at
  // most the tiers' read timeout. Returns the tokens restored.
  int64_t restore(std::span<const int32_t> tokens, std::string_view salt, int64_t max_tokens);
  int64_t restored_tokens() const { return restored_tokens_; }

 private:
  void offer(const BlockIndexed& e);

  PrefixCache& cache_;
  LowerTiers& tiers_;
  const BlockHidden hidden_;  // the blocks' hidden-row section (off: none kept)
  bool restoring_ = false;    // blocks committed by restore() came from the tiers: not offered
  std::vector<uint64_t> keys_;
  std::vector<int32_t> table_;
  int64_t restored_tokens_ = 0;
};

}  // namespace invar
