// The prefix cache (DESIGN rule N5, STYLE 7–9): a ref-counted pool of KV blocks, an index of
// full blocks keyed by a hash chain, recurrent-state checkpoints attached to the block they
// end, and LRU eviction under one byte budget. Pure bookkeeping: it never runs the model.
//
// Keys: key(block 0) = H(salt key, tokens), key(block i) = H(key(block i−1), tokens); tokens
// are verified on every hit. A checkpoint attached to indexed block i holds the recurrent state
// after the last token of block i, so "blocks 0..i resident + checkpoint on i" is a complete
// restart point. Invariant kept by eviction: every indexed block's parent is indexed, so every
// resident checkpoint keeps its whole KV prefix. Only leaves (no indexed child) are evicted;
// a block that holds a checkpoint loses the checkpoint first.
//
// Plan, then apply: lookup() is a query; hit_apply(), block_acquire(), block_commit() mutate.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cache/lru_list.h"
#include "cache/slot_arena.h"

namespace invar {

struct CacheConfig {
  int64_t block_size = 64;       // tokens per KV block and per prefix-index entry
  int64_t block_floats = 0;      // floats per KV block (Model::kv_block_floats(block_size))
  int64_t state_floats = 0;      // floats per checkpoint (Model::state_floats)
  int64_t checkpoint_every = 1;  // checkpoints at boundaries that are multiples of N blocks
  int64_t cache_bytes = 0;       // budget for every KV block (referenced or cached) + checkpoints
};

// What lookup() found: the longest run of indexed full blocks that ends at a checkpoint.
struct PrefixHit {
  int64_t n_tokens = 0;         // tokens served from the cache (n_blocks · block_size)
  std::vector<int32_t> blocks;  // [n_blocks] block ids, in prefix order
  std::vector<uint64_t> keys;   // [n_blocks] chain keys of those blocks
  int32_t checkpoint = -1;      // state after the last block; −1 when n_tokens = 0
};

struct CacheStats {
  int64_t blocks_capacity = 0;       // KV blocks the budget could hold with no checkpoint
  int64_t blocks_resident = 0;       // blocks in use: referenced or indexed
  int64_t blocks_referenced = 0;     // blocks with ref > 0 (held by requests)
  int64_t blocks_indexed = 0;        // blocks findable by lookup
  int64_t checkpoints_resident = 0;  // attached + in flight
  int64_t bytes_resident = 0;        // ≤ cache_bytes, always
  int64_t evicted_blocks = 0, evicted_checkpoints = 0;
  int64_t lookups = 0, hits = 0, hit_tokens = 0;
  int64_t collisions = 0;  // equal keys with different tokens (never reused)
};

class PrefixCache {
 public:
  explicit PrefixCache(const CacheConfig& cfg);
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  static uint64_t salt_key(std::string_view salt);
  static uint64_t block_key(uint64_t parent_key, std::span<const int32_t> tokens);

  const CacheConfig& config() const { return cfg_; }

  // Query: the longest reusable prefix of tokens using at most max_tokens tokens (callers pass
  // length − 1 so at least one token is recomputed to produce logits).
  PrefixHit lookup(std::span<const int32_t> tokens, uint64_t salt_key, int64_t max_tokens) const;
  // Apply: references the hit's blocks and copies its checkpoint into state[state_floats].
  // Counts a lookup (and a hit when n_tokens > 0). hit must come from lookup() with no
  // mutation in between.
  void hit_apply(const PrefixHit& hit, float* state);

  // A block referenced once by the caller, evicting if needed; −1 when the budget is all
  // referenced or in flight.
  int32_t block_acquire();
  void block_release(int32_t block);  // drops one reference
  float* block_data(int32_t block) const { return blocks_.data(block); }

  // A checkpoint buffer owned by the caller until block_commit() consumes it or
  // checkpoint_release() returns it; −1 when nothing can be evicted to make room.
  int32_t checkpoint_acquire();
  void checkpoint_release(int32_t checkpoint);
  float* checkpoint_data(int32_t checkpoint) const { return checkpoints_.data(checkpoint); }

  // Block `block` (referenced by the caller) now holds the full block `index` of a sequence:
  // tokens[block_size], chain key `key` with parent key `parent_key`. Indexes it — or, when an
  // identical block is already indexed, leaves `block` private and gives the checkpoint to the
  // indexed twin (same tokens ⇒ same bits by the contract). Consumes `checkpoint` (−1: none).
  void block_commit(int32_t block, int64_t index, uint64_t parent_key, uint64_t key,
                    std::span<const int32_t> tokens, int32_t checkpoint);

  // Blocks block_acquire() could hand out now, counting evictable ones (an estimate from above
  // only where an unreferenced block is pinned by a referenced child of a duplicate chain).
  int64_t blocks_obtainable() const;
  int64_t block_ref(int32_t block) const { return ref_[static_cast<size_t>(block)]; }
  CacheStats stats() const;
  // Aborts if any bookkeeping invariant is broken (tests call it after every operation).
  void check_invariants() const;

 private:
  bool room_make(int64_t bytes);
  void block_evict(int32_t b);
  void checkpoint_evict(int32_t c);
  void checkpoint_attach(int32_t b, int32_t c);
  void useless_update(int32_t b);
  bool tokens_equal(int32_t b, std::span<const int32_t> tokens) const;

  CacheConfig cfg_;
  SlotArena blocks_;
  SlotArena checkpoints_;
  int64_t bytes_used_ = 0;
  // Per block [capacity]:
  std::vector<int32_t> ref_;
  std::vector<uint8_t> indexed_;
  std::vector<uint64_t> key_, parent_key_;
  std::vector<int32_t> parent_;      // indexed parent block, −1 for a first block
  std::vector<int32_t> n_children_;  // indexed blocks whose parent is this one
  std::vector<int32_t> checkpoint_;  // attached checkpoint, −1 if none
  std::vector<int32_t> tokens_;      // [capacity][block_size] tokens of indexed blocks
  // Per checkpoint [capacity]:
  std::vector<int32_t> owner_;  // block it is attached to, −1 while in flight
  std::unordered_map<uint64_t, int32_t> index_;
  // Eviction order. useless_: indexed leaves, unreferenced, without a checkpoint (they can
  // serve no hit, so they go first). attached_: every attached checkpoint, LRU by last use.
  LruList useless_;
  LruList attached_;
  int64_t unreferenced_indexed_ = 0;
  int64_t referenced_ = 0;  // blocks with ref > 0
  int64_t evicted_blocks_ = 0, evicted_checkpoints_ = 0;
  int64_t lookups_ = 0, hits_ = 0, hit_tokens_ = 0, collisions_ = 0;
};

}  // namespace invar
