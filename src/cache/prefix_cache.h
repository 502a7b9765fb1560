// The prefix cache (DESIGN rule N5, STYLE 7–9): a ref-counted pool of KV blocks, an index of
// full blocks keyed by a hash chain, recurrent-state checkpoints attached to the block they
// end, and LRU eviction under one byte budget. Pure bookkeeping: it never runs the model.
//
// Keys are the cache's own: key(block 0) = H(salt key, tokens), key(block i) = H(key(block i−1),
// tokens), computed when a block is committed (callers pass blocks and tokens, as vLLM's
// BlockPool.cache_full_blocks takes them); tokens are verified on every hit. A checkpoint
// attached to indexed block i holds the recurrent state after the last token of block i, so
// "blocks 0..i resident + checkpoint on i" is a complete restart point. Invariant kept by
// eviction: every indexed block's parent is indexed, so every resident checkpoint keeps its
// whole KV prefix. Only leaves (no indexed child) are evicted; a block that holds a checkpoint
// loses the checkpoint first.
//
// Memory: each block is charged its KV slot (with the drafter's hidden rows when the engine keeps
// them: cache/block_hidden.h) plus its bookkeeping (tokens, links, index entry),
// each checkpoint its state slot plus its links, so the budget bounds everything that grows with
// the number of blocks; tables grow with the ids actually used, never with the capacity, and
// shrink when the use falls: once a kind has made more than 1.5 × its ids in use, its cached
// entries (unreferenced indexed blocks, attached checkpoints) are moved bit for bit to the
// lowest free ids and the ids above the highest one in use are un-made (tables_compact()). Ids
// the engine holds (referenced blocks, checkpoints in flight) never move.
//
// Plan, then apply: lookup() is a query; hit_apply(), block_acquire(), block_commit() mutate.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cache/lru_list.h"
#include "cache/slot_arena.h"
#include "cache/tier_secret.h"

namespace invar {

struct CacheConfig {
  int64_t block_size = 64;       // tokens per KV block and per prefix-index entry
  int64_t block_floats = 0;      // floats per KV block (Model::kv_block_floats(block_size))
  int64_t hidden_floats = 0;     // floats after them for a drafter's hidden rows (BlockHidden)
  int64_t state_floats = 0;      // floats per checkpoint (Model::state_floats)
  int64_t checkpoint_every = 1;  // checkpoints at boundaries that are multiples of N blocks
  int64_t cache_bytes = 0;       // budget for every block (referenced or cached) + checkpoints
  int key_bits = 64;             // chain keys keep their low key_bits bits (tests force collisions)
  // Keys the salt key (HMAC-SHA256): no chain key can be computed, nor a salt aimed at another's
  // chain, without it (docs/security.md). The engine sets tier_secret_resolve()'s.
  SecretKey chain_secret{};
};

// What one block and one checkpoint cost against the budget, and what it can hold.
struct CacheBudget {
  int64_t cache_bytes = 0;
  int64_t block_kv_bytes = 0;          // one block's KV slot (0 for a model without attention),
                                       // hidden rows included
  int64_t block_hidden_bytes = 0;      // of which the drafter's hidden rows (0: none kept)
  int64_t block_meta_bytes = 0;        // its tokens, links and index entry
  int64_t checkpoint_state_bytes = 0;  // one checkpoint's state slot (0 without recurrence)
  int64_t checkpoint_meta_bytes = 0;   // its links
  int64_t blocks_max = 0;              // blocks the budget holds with no checkpoint
  int64_t checkpoints_max = 0;         // checkpoints it holds with no block

  int64_t block_bytes() const { return block_kv_bytes + block_meta_bytes; }
  int64_t checkpoint_bytes() const { return checkpoint_state_bytes + checkpoint_meta_bytes; }
  std::string describe() const;  // one line for the start-up log
};

// What lookup() found: the longest run of indexed full blocks that ends at a checkpoint.
struct PrefixHit {
  int64_t n_tokens = 0;         // tokens served from the cache (n_blocks · block_size)
  std::vector<int32_t> blocks;  // [n_blocks] block ids, in prefix order
  int32_t checkpoint = -1;      // state after the last block; −1 when n_tokens = 0
};

struct CacheStats {
  int64_t blocks_capacity = 0;       // KV blocks the budget could hold with no checkpoint
  int64_t blocks_resident = 0;       // blocks in use: referenced or indexed
  int64_t blocks_referenced = 0;     // blocks with ref > 0 (held by requests)
  int64_t blocks_indexed = 0;        // blocks findable by lookup
  int64_t checkpoints_resident = 0;  // attached + in flight
  int64_t bytes_resident = 0;        // ≤ cache_bytes, always: the sum of the three below
  int64_t bytes_kv = 0;              // KV slots of resident blocks
  int64_t bytes_checkpoints = 0;     // state slots of resident checkpoints
  int64_t bytes_metadata = 0;        // bookkeeping of resident blocks and checkpoints
  int64_t evicted_blocks = 0, evicted_checkpoints = 0;
  int64_t lookups = 0, hits = 0, hit_tokens = 0;
  int64_t collisions = 0;  // equal keys with different tokens (never reused)
  // The per-id tables: rows exist for ids 0..made−1 of each kind, in use or not; the budget
  // charges only the rows in use, compaction keeps the others few (≤ 1.5 × use + a few).
  int64_t block_ids = 0;       // block ids made (rows of the block tables)
  int64_t checkpoint_ids = 0;  // checkpoint ids made
  int64_t bytes_tables = 0;    // the tables' allocated memory, both kinds, arenas' lists included
  int64_t compactions = 0;     // table compactions that moved or un-made ids
  int64_t blocks_moved = 0, checkpoints_moved = 0;  // renumbered by compactions
  CacheBudget budget;
};

// A block that has just become findable, or an indexed block that has just gained its
// checkpoint: what the lower tiers (tier_bridge.h) copy out.
struct BlockIndexed {
  uint64_t key = 0, parent_key = 0;
  std::span<const int32_t> tokens;  // [block_size]
  int32_t block = -1;
  int32_t checkpoint = -1;  // attached checkpoint, −1 if none
};

class PrefixCache {
 public:
  explicit PrefixCache(const CacheConfig& cfg);
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The chain's hash function (XXH3): the first block's parent is salt_key(cache salt), a keyed
  // hash of the salt under config().chain_secret.
  uint64_t salt_key(std::string_view salt) const;
  static uint64_t block_key(uint64_t parent_key, std::span<const int32_t> tokens);
  // What a cache with this configuration charges per block and per checkpoint.
  static CacheBudget budget_plan(const CacheConfig& cfg);

  const CacheConfig& config() const { return cfg_; }
  const CacheBudget& budget() const { return budget_; }

  // Query: the longest reusable prefix of tokens under this salt using at most max_tokens tokens
  // (callers pass length − 1 so at least one token is recomputed to produce logits).
  PrefixHit lookup(std::span<const int32_t> tokens, std::string_view salt,
                   int64_t max_tokens) const;
  // Apply: references the hit's blocks and copies its checkpoint into state[state_floats].
  // Counts a lookup (and a hit when n_tokens > 0). hit must come from lookup() with no
  // mutation in between.
  void hit_apply(const PrefixHit& hit, float* state);

  // A block referenced once by the caller, evicting if needed; −1 when the budget is all
  // referenced or in flight.
  int32_t block_acquire();
  // The same, but only from room the budget has free: it never evicts (−1 otherwise). For a
  // block only speculation wants, which plain decoding might never acquire.
  int32_t block_acquire_spare();
  void block_release(int32_t block);  // drops one reference
  float* block_data(int32_t block) const { return blocks_.data(block); }

  // A checkpoint buffer owned by the caller until block_commit() consumes it or
  // checkpoint_release() returns it; −1 when nothing can be evicted to make room.
  int32_t checkpoint_acquire();
  void checkpoint_release(int32_t checkpoint);
  float* checkpoint_data(int32_t checkpoint) const { return checkpoints_.data(checkpoint); }

  // A sequence under `salt` with block table `table` and tokens `tokens` has computed full
  // block `index`: table[index] (referenced by the caller) holds tokens [index·bs, (index+1)·bs),
  // and blocks 0..index−1 were committed before (or came from a hit). Computes the block's chain
  // key and indexes it — or, when an identical block is already indexed, leaves it private and
  // gives the checkpoint to the indexed twin (same tokens ⇒ same bits by the contract).
  // Consumes `checkpoint` (−1: none).
  void block_commit(std::span<const int32_t> table, int64_t index, std::span<const int32_t> tokens,
                    std::string_view salt, int32_t checkpoint);

  // keys[0] = the salt key, keys[i + 1] = the chain key of full block i, for n_blocks blocks:
  // the keys block_commit() gives them.
  void chain_keys(std::span<const int32_t> tokens, std::string_view salt, int64_t n_blocks,
                  std::vector<uint64_t>& keys) const;
  // One more reference on an indexed block (dropped with block_release): it stays resident.
  void block_pin(int32_t block);
  // Called inside block_commit() for every BlockIndexed event; the listener must not call back
  // into the cache. Empty: none.
  void index_listen(std::function<void(const BlockIndexed&)> listener) {
    listener_ = std::move(listener);
  }

  // Apply: moves every movable entry to the lowest free id of its kind and un-makes the ids
  // above the highest one in use (the cache also does this itself, amortised, when its tables
  // outgrow their use). Renumbers cached blocks and attached checkpoints only: a PrefixHit taken
  // before it is stale; ids held by the caller stay valid.
  void tables_compact();

  // Blocks block_acquire() could hand out now, counting evictable ones (an estimate from above
  // only where an unreferenced block is pinned by a referenced child of a duplicate chain).
  int64_t blocks_obtainable() const;
  int64_t block_ref(int32_t block) const { return meta_[static_cast<size_t>(block)].ref; }
  CacheStats stats() const;
  // Aborts if any bookkeeping invariant is broken (tests call it after every operation).
  void check_invariants() const;

 private:
  uint64_t key_mask(uint64_t key) const;
  bool room_make(int64_t bytes);
  void tables_grow();
  void tables_fit();
  void tables_shrink();
  void blocks_compact();
  void checkpoints_compact();
  void block_renumber(int32_t from, int32_t to);
  void memory_trim();
  void block_evict(int32_t b);
  void checkpoint_evict(int32_t c);
  void checkpoint_attach(int32_t b, int32_t c);
  void useless_update(int32_t b);
  bool tokens_equal(int32_t b, std::span<const int32_t> tokens) const;

  // What the cache knows of one block id.
  struct BlockMeta {
    uint64_t key = 0;         // chain key, once committed
    uint64_t parent_key = 0;  // the key it was chained from (the salt key for a first block)
    int32_t ref = 0;
    int32_t parent = -1;      // indexed parent block, −1 for a first block
    int32_t n_children = 0;   // indexed blocks whose parent is this one
    int32_t checkpoint = -1;  // attached checkpoint, −1 if none
    uint8_t stage = 0;        // kOpen (being filled), kCommitted (key set, private), kIndexed
  };
  static constexpr uint8_t kOpen = 0, kCommitted = 1, kIndexed = 2;
  bool indexed(int32_t b) const { return meta_[static_cast<size_t>(b)].stage == kIndexed; }

  CacheConfig cfg_;
  CacheBudget budget_;
  SlotArena blocks_;
  SlotArena checkpoints_;
  int64_t blocks_used_ = 0, checkpoints_used_ = 0;  // charged: referenced/indexed, acquired
  // Per block id made so far (grown by tables_grow()):
  std::vector<BlockMeta> meta_;
  std::vector<int32_t> tokens_;  // [ids][block_size] tokens of committed blocks
  // Per checkpoint id made so far:
  std::vector<int32_t> owner_;  // block it is attached to, −1 while in flight
  std::unordered_map<uint64_t, int32_t> index_;
  // Eviction order. useless_: indexed leaves, unreferenced, without a checkpoint (they can
  // serve no hit, so they go first). attached_: every attached checkpoint, LRU by last use.
  LruList useless_;
  LruList attached_;
  int64_t unreferenced_indexed_ = 0;
  int64_t referenced_ = 0;  // blocks with ref > 0
  std::function<void(const BlockIndexed&)> listener_;
  int64_t evicted_blocks_ = 0, evicted_checkpoints_ = 0;
  int64_t lookups_ = 0, hits_ = 0, hit_tokens_ = 0, collisions_ = 0;
  // Arena changes() at the last compaction of each kind: the next one waits for made()/8 more,
  // so its O(made) cost is amortised even when held ids keep it from shrinking much.
  int64_t blocks_compacted_at_ = 0, checkpoints_compacted_at_ = 0;
  int64_t compactions_ = 0, blocks_moved_ = 0, checkpoints_moved_ = 0;
};

}  // namespace invar
