#include "cache/prefix_cache.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "cache/table_capacity.h"
#include "core/error.h"

namespace invar {

namespace {

// An index entry: a hash-map node (next pointer + key + block id, allocator rounding) and its
// share of the bucket array.
constexpr int64_t kIndexEntryBytes = 48;

// A kind's tables are due for compaction when it has made more than 1.5 × its ids in use (and
// a few more: tiny caches never bother), and made()/8 arena changes have passed since its last
// compaction, which pays for the O(made) pass even when held ids let it shrink little. In use
// only ever falls by releases, which are changes: without held ids in the way the wait is
// always over before the ratio is reached.
constexpr int64_t kIdsSlack = 8;

bool compaction_due(const SlotArena& a, int64_t compacted_at) {
  return a.made() > a.in_use() + a.in_use() / 2 + kIdsSlack &&
         a.changes() - compacted_at >= a.made() / 8;
}

int64_t slots_within(int64_t budget, int64_t slot_cost) {
  return std::min<int64_t>(budget / slot_cost, (int64_t{1} << 31) - 1);
}

std::string mib(int64_t bytes) {
  const int64_t tenths = (bytes * 10 + (1 << 19)) >> 20;
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " MiB";
}

}  // namespace

CacheBudget PrefixCache::budget_plan(const CacheConfig& cfg) {
  CacheBudget b;
  b.cache_bytes = cfg.cache_bytes;
  b.block_kv_bytes = SlotArena::slot_bytes_for(cfg.block_floats + cfg.hidden_floats);
  b.block_hidden_bytes = cfg.hidden_floats * static_cast<int64_t>(sizeof(float));
  b.block_meta_bytes = static_cast<int64_t>(sizeof(BlockMeta)) +
                       cfg.block_size * static_cast<int64_t>(sizeof(int32_t)) + LruList::kIdBytes +
                       SlotArena::kIdBytes + kIndexEntryBytes;
  b.checkpoint_state_bytes = SlotArena::slot_bytes_for(cfg.state_floats);
  b.checkpoint_meta_bytes =
      static_cast<int64_t>(sizeof(int32_t)) + LruList::kIdBytes + SlotArena::kIdBytes;
  b.blocks_max = slots_within(cfg.cache_bytes, b.block_bytes());
  b.checkpoints_max = slots_within(cfg.cache_bytes, b.checkpoint_bytes());
  return b;
}

std::string CacheBudget::describe() const {
  return "cache budget " + mib(cache_bytes) + " shared by KV blocks (" +
         std::to_string(block_kv_bytes) + " B KV" +
         (block_hidden_bytes > 0
              ? " (" + std::to_string(block_hidden_bytes) + " B of it MTP hidden rows)"
              : std::string()) +
         " + " + std::to_string(block_meta_bytes) + " B metadata each, at most " +
         std::to_string(blocks_max) + ") and checkpoints (" +
         std::to_string(checkpoint_state_bytes) + " B state + " +
         std::to_string(checkpoint_meta_bytes) + " B metadata each, at most " +
         std::to_string(checkpoints_max) + ")";
}

PrefixCache::PrefixCache(const CacheConfig& cfg)
    : cfg_(cfg),
      budget_(budget_plan(cfg)),
      blocks_(cfg.block_floats + cfg.hidden_floats, budget_.blocks_max),
      checkpoints_(cfg.state_floats, budget_.checkpoints_max) {
  INVAR_CHECK(cfg.block_size > 0 && cfg.checkpoint_every > 0 && cfg.cache_bytes >= 0 &&
              cfg.key_bits >= 0 && cfg.key_bits <= 64);
}

uint64_t PrefixCache::salt_key(std::string_view salt) const {
  // Keyed: two salts' chains meet only if HMAC-SHA256 collides in 64 bits, and no request can
  // choose a salt to make that happen, nor compute a chain key to plant a record under.
  return keyed_hash64(cfg_.chain_secret, "salt",
                      {reinterpret_cast<const unsigned char*>(salt.data()), salt.size()});
}

uint64_t PrefixCache::block_key(uint64_t parent_key, std::span<const int32_t> tokens) {
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), parent_key);
}

uint64_t PrefixCache::key_mask(uint64_t key) const {
  return cfg_.key_bits >= 64 ? key : key & ((uint64_t{1} << cfg_.key_bits) - 1);
}

bool PrefixCache::tokens_equal(int32_t b, std::span<const int32_t> tokens) const {
  const int32_t* stored = tokens_.data() + static_cast<size_t>(b) * cfg_.block_size;
  return static_cast<int64_t>(tokens.size()) == cfg_.block_size &&
         std::memcmp(stored, tokens.data(), tokens.size_bytes()) == 0;
}

PrefixHit PrefixCache::lookup(std::span<const int32_t> tokens, std::string_view salt,
                              int64_t max_tokens) const {
  PrefixHit hit;
  const int64_t bs = cfg_.block_size;
  const int64_t n_full = std::min<int64_t>(static_cast<int64_t>(tokens.size()), max_tokens) / bs;
  uint64_t parent_key = key_mask(salt_key(salt));
  int32_t parent = -1;
  int64_t usable = 0;  // blocks up to the last one carrying a checkpoint
  for (int64_t i = 0; i < n_full; ++i) {
    const auto block_tokens = tokens.subspan(static_cast<size_t>(i * bs), static_cast<size_t>(bs));
    const uint64_t key = key_mask(block_key(parent_key, block_tokens));
    const auto it = index_.find(key);
    if (it == index_.end()) break;
    const int32_t b = it->second;
    const BlockMeta& m = meta_[static_cast<size_t>(b)];
    // A key match is only a claim: the tokens and the parent must match too.
    if (!tokens_equal(b, block_tokens) || m.parent != parent || m.parent_key != parent_key) break;
    hit.blocks.push_back(b);
    if (m.checkpoint >= 0) {
      usable = i + 1;
      hit.checkpoint = m.checkpoint;
    }
    parent_key = key;
    parent = b;
  }
  hit.blocks.resize(static_cast<size_t>(usable));
  hit.n_tokens = usable * bs;
  if (usable == 0) hit.checkpoint = -1;
  return hit;
}

void PrefixCache::hit_apply(const PrefixHit& hit, float* state) {
  ++lookups_;
  if (hit.n_tokens == 0) return;
  INVAR_CHECK(hit.checkpoint >= 0 && hit.checkpoint < checkpoints_.made() &&
                  owner_[static_cast<size_t>(hit.checkpoint)] == hit.blocks.back(),
              "stale prefix hit");
  ++hits_;
  hit_tokens_ += hit.n_tokens;
  for (int32_t b : hit.blocks) {
    INVAR_CHECK(b >= 0 && b < blocks_.made() && indexed(b), "stale prefix hit");
    if (meta_[static_cast<size_t>(b)].ref++ == 0) {
      --unreferenced_indexed_;
      ++referenced_;
    }
    useless_update(b);
  }
  if (cfg_.state_floats > 0)
    std::memcpy(state, checkpoints_.data(hit.checkpoint),
                static_cast<size_t>(cfg_.state_floats) * sizeof(float));
  attached_.touch(hit.checkpoint);
}

bool PrefixCache::room_make(int64_t bytes) {
  while (blocks_used_ * budget_.block_bytes() + checkpoints_used_ * budget_.checkpoint_bytes() +
             bytes >
         cfg_.cache_bytes) {
    if (!useless_.empty()) {
      block_evict(useless_.front());
    } else if (!attached_.empty()) {
      checkpoint_evict(attached_.front());
    } else {
      return false;
    }
  }
  return true;
}

// Ids are made one at a time by the arenas: the per-id tables follow them.
void PrefixCache::tables_grow() {
  const auto nb = static_cast<size_t>(blocks_.made());
  if (meta_.size() < nb) {
    meta_.resize(nb);
    tokens_.resize(nb * static_cast<size_t>(cfg_.block_size));
    useless_.grow(blocks_.made());
  }
  const auto nc = static_cast<size_t>(checkpoints_.made());
  if (owner_.size() < nc) {
    owner_.resize(nc, -1);
    attached_.grow(checkpoints_.made());
  }
}

// After every public operation that acquires or releases ids: compacts a kind whose tables
// have outgrown its use (amortised, see compaction_due).
void PrefixCache::tables_fit() {
  if (compaction_due(blocks_, blocks_compacted_at_)) blocks_compact();
  if (compaction_due(checkpoints_, checkpoints_compacted_at_)) checkpoints_compact();
}

void PrefixCache::tables_compact() {
  blocks_compact();
  checkpoints_compact();
}

// From the highest id down, unreferenced indexed blocks move to the lowest free id until a
// referenced block (the engine holds its id) or the lack of a lower free id stops it; the free
// ids on top are then un-made. The move copies the KV slot and the tokens bit for bit: the
// block serves the same hits with the same bits under its new id.
void PrefixCache::blocks_compact() {
  const auto made = static_cast<int32_t>(blocks_.made());
  std::vector<int32_t> moved_to;  // [made − 1 − id] new id of each id above the stop, −1: free
  int32_t b = made - 1;
  int64_t moved = 0;
  for (; b >= 0; --b) {
    int32_t to = -1;
    if (blocks_.used(b)) {
      if (meta_[static_cast<size_t>(b)].ref > 0) break;
      to = blocks_.move_down(b);
      if (to == b) break;
      block_renumber(b, to);
      ++moved;
    }
    moved_to.push_back(to);
  }
  // Children name their parent by id: one pass renames the parents that moved.
  if (moved > 0)
    for (BlockMeta& m : meta_)
      if (m.stage == kIndexed && m.parent > b)
        m.parent = moved_to[static_cast<size_t>(made - 1 - m.parent)];
  const int64_t unmade = blocks_.shrink();
  tables_shrink();
  memory_trim();
  blocks_compacted_at_ = blocks_.changes();
  compactions_ += moved > 0 || unmade > 0;
}

// The block's row, index entry, checkpoint owner and LRU place go to `to` (a free id whose
// slot already holds the block's KV); `from` is left as a free id's row.
void PrefixCache::block_renumber(int32_t from, int32_t to) {
  BlockMeta& m = meta_[static_cast<size_t>(to)];
  m = meta_[static_cast<size_t>(from)];
  meta_[static_cast<size_t>(from)] = BlockMeta{};
  const auto bs = static_cast<size_t>(cfg_.block_size);
  std::memcpy(tokens_.data() + static_cast<size_t>(to) * bs,
              tokens_.data() + static_cast<size_t>(from) * bs, bs * sizeof(int32_t));
  const auto it = index_.find(m.key);
  INVAR_CHECK(it != index_.end() && it->second == from, "block " + std::to_string(from));
  it->second = to;
  if (m.checkpoint >= 0) owner_[static_cast<size_t>(m.checkpoint)] = to;
  if (useless_.contains(from)) useless_.rename(from, to);
  ++blocks_moved_;
}

// As blocks_compact(), for attached checkpoints (a checkpoint in flight stops it); the state is
// copied bit for bit and keeps its place in the LRU order.
void PrefixCache::checkpoints_compact() {
  int64_t moved = 0;
  for (auto c = static_cast<int32_t>(checkpoints_.made()) - 1; c >= 0; --c) {
    if (!checkpoints_.used(c)) continue;
    const int32_t b = owner_[static_cast<size_t>(c)];
    if (b < 0) break;
    const int32_t to = checkpoints_.move_down(c);
    if (to == c) break;
    owner_[static_cast<size_t>(to)] = b;
    owner_[static_cast<size_t>(c)] = -1;
    meta_[static_cast<size_t>(b)].checkpoint = to;
    attached_.rename(c, to);
    ++moved;
  }
  const int64_t unmade = checkpoints_.shrink();
  tables_shrink();
  memory_trim();
  checkpoints_moved_ += moved;
  checkpoints_compacted_at_ = checkpoints_.changes();
  compactions_ += moved > 0 || unmade > 0;
}

// The per-id tables follow the arenas down, as tables_grow() follows them up.
void PrefixCache::tables_shrink() {
  const auto nb = static_cast<size_t>(blocks_.made());
  if (meta_.size() > nb) {
    meta_.resize(nb);
    tokens_.resize(nb * static_cast<size_t>(cfg_.block_size));
    useless_.shrink(blocks_.made());
    capacity_fit(meta_);
    capacity_fit(tokens_);
  }
  const auto nc = static_cast<size_t>(checkpoints_.made());
  if (owner_.size() > nc) {
    owner_.resize(nc);
    attached_.shrink(checkpoints_.made());
    capacity_fit(owner_);
  }
}

// Freed slots keep their pages for fast reuse until the two arenas together would hold more
// than the budget; then the free slots of both give their pages back.
void PrefixCache::memory_trim() {
  if (blocks_.bytes_warm() + checkpoints_.bytes_warm() <= cfg_.cache_bytes) return;
  blocks_.trim();
  checkpoints_.trim();
}

void PrefixCache::block_evict(int32_t b) {
  BlockMeta& m = meta_[static_cast<size_t>(b)];
  INVAR_CHECK(m.stage == kIndexed && m.ref == 0 && m.n_children == 0 && m.checkpoint < 0);
  useless_.remove(b);
  index_.erase(m.key);
  m.stage = kOpen;
  --unreferenced_indexed_;
  const int32_t p = m.parent;
  m.parent = -1;
  if (p >= 0) {
    --meta_[static_cast<size_t>(p)].n_children;
    useless_update(p);
  }
  blocks_.release(b);
  --blocks_used_;
  ++evicted_blocks_;
}

void PrefixCache::checkpoint_evict(int32_t c) {
  const int32_t b = owner_[static_cast<size_t>(c)];
  INVAR_CHECK(b >= 0 && meta_[static_cast<size_t>(b)].checkpoint == c);
  attached_.remove(c);
  meta_[static_cast<size_t>(b)].checkpoint = -1;
  owner_[static_cast<size_t>(c)] = -1;
  checkpoints_.release(c);
  --checkpoints_used_;
  ++evicted_checkpoints_;
  useless_update(b);
}

void PrefixCache::checkpoint_attach(int32_t b, int32_t c) {
  meta_[static_cast<size_t>(b)].checkpoint = c;
  owner_[static_cast<size_t>(c)] = b;
  attached_.push_back(c);
  useless_update(b);
}

void PrefixCache::useless_update(int32_t b) {
  const BlockMeta& m = meta_[static_cast<size_t>(b)];
  const bool useless = m.stage == kIndexed && m.ref == 0 && m.n_children == 0 && m.checkpoint < 0;
  if (useless && !useless_.contains(b)) useless_.push_back(b);
  if (!useless && useless_.contains(b)) useless_.remove(b);
}

int32_t PrefixCache::block_acquire() {
  if (!room_make(budget_.block_bytes())) return -1;
  const int32_t b = blocks_.acquire();
  INVAR_CHECK(b >= 0, "block arena smaller than the byte budget");
  tables_grow();
  memory_trim();
  ++blocks_used_;
  BlockMeta& m = meta_[static_cast<size_t>(b)];
  m = BlockMeta{};
  m.ref = 1;
  ++referenced_;
  tables_fit();
  return b;
}

int32_t PrefixCache::block_acquire_spare() {
  if (blocks_used_ * budget_.block_bytes() + checkpoints_used_ * budget_.checkpoint_bytes() +
          budget_.block_bytes() >
      cfg_.cache_bytes)
    return -1;
  return block_acquire();
}

void PrefixCache::block_release(int32_t b) {
  INVAR_CHECK(b >= 0 && b < blocks_.made() && meta_[static_cast<size_t>(b)].ref > 0,
              "block " + std::to_string(b));
  BlockMeta& m = meta_[static_cast<size_t>(b)];
  if (--m.ref > 0) return;
  --referenced_;
  if (m.stage == kIndexed) {
    // Stays findable until evicted (STYLE 8); its release time orders eviction.
    ++unreferenced_indexed_;
    useless_update(b);
    if (m.checkpoint >= 0) attached_.touch(m.checkpoint);
  } else {
    m.stage = kOpen;
    blocks_.release(b);
    --blocks_used_;
  }
  tables_fit();
}

int32_t PrefixCache::checkpoint_acquire() {
  if (!room_make(budget_.checkpoint_bytes())) return -1;
  const int32_t c = checkpoints_.acquire();
  INVAR_CHECK(c >= 0, "checkpoint arena smaller than the byte budget");
  tables_grow();
  memory_trim();
  ++checkpoints_used_;
  owner_[static_cast<size_t>(c)] = -1;
  tables_fit();
  return c;
}

void PrefixCache::checkpoint_release(int32_t c) {
  INVAR_CHECK(c >= 0 && c < checkpoints_.made() && owner_[static_cast<size_t>(c)] == -1,
              "checkpoint " + std::to_string(c));
  checkpoints_.release(c);
  --checkpoints_used_;
  tables_fit();
}

void PrefixCache::block_commit(std::span<const int32_t> table, int64_t index,
                               std::span<const int32_t> tokens, std::string_view salt,
                               int32_t checkpoint) {
  const int64_t bs = cfg_.block_size;
  INVAR_CHECK(index >= 0 && index < static_cast<int64_t>(table.size()) &&
              (index + 1) * bs <= static_cast<int64_t>(tokens.size()));
  const int32_t block = table[static_cast<size_t>(index)];
  BlockMeta& m = meta_[static_cast<size_t>(block)];
  INVAR_CHECK(m.ref > 0 && m.stage == kOpen, "block " + std::to_string(block));
  uint64_t parent_key = key_mask(salt_key(salt));
  if (index > 0) {
    const BlockMeta& pm = meta_[static_cast<size_t>(table[static_cast<size_t>(index - 1)])];
    INVAR_CHECK(pm.stage != kOpen,
                "block " + std::to_string(index) + " committed before its parent");
    parent_key = pm.key;
  }
  const auto block_tokens =
      tokens.subspan(static_cast<size_t>(index * bs), static_cast<size_t>(bs));
  const uint64_t key = key_mask(block_key(parent_key, block_tokens));
  m.key = key;
  m.parent_key = parent_key;
  m.stage = kCommitted;
  std::memcpy(tokens_.data() + static_cast<size_t>(block) * static_cast<size_t>(bs),
              block_tokens.data(), block_tokens.size_bytes());
  auto give_back = [&] {
    if (checkpoint >= 0) checkpoint_release(checkpoint);
  };
  if (const auto it = index_.find(key); it != index_.end()) {
    const int32_t twin = it->second;
    BlockMeta& tm = meta_[static_cast<size_t>(twin)];
    if (tokens_equal(twin, block_tokens) && tm.parent_key == parent_key) {
      if (checkpoint >= 0 && tm.checkpoint < 0) {
        checkpoint_attach(twin, checkpoint);
        if (listener_) listener_({key, parent_key, block_tokens, twin, checkpoint});
      } else {
        give_back();
      }
    } else {
      ++collisions_;
      give_back();
    }
    return;
  }
  int32_t parent = -1;
  if (index > 0) {
    const auto pit = index_.find(parent_key);
    // The parent was evicted (or collided): indexing this block would orphan it.
    if (pit == index_.end()) return give_back();
    parent = pit->second;
  }
  m.stage = kIndexed;
  m.parent = parent;
  index_.emplace(key, block);
  if (parent >= 0) {
    ++meta_[static_cast<size_t>(parent)].n_children;
    useless_update(parent);
  }
  if (checkpoint >= 0) checkpoint_attach(block, checkpoint);
  if (listener_) listener_({key, parent_key, block_tokens, block, checkpoint});
}

void PrefixCache::chain_keys(std::span<const int32_t> tokens, std::string_view salt,
                             int64_t n_blocks, std::vector<uint64_t>& keys) const {
  const int64_t bs = cfg_.block_size;
  INVAR_CHECK(n_blocks >= 0 && n_blocks * bs <= static_cast<int64_t>(tokens.size()));
  keys.resize(static_cast<size_t>(n_blocks) + 1);
  keys[0] = key_mask(salt_key(salt));
  for (int64_t i = 0; i < n_blocks; ++i)
    keys[static_cast<size_t>(i) + 1] =
        key_mask(block_key(keys[static_cast<size_t>(i)],
                           tokens.subspan(static_cast<size_t>(i * bs), static_cast<size_t>(bs))));
}

void PrefixCache::block_pin(int32_t b) {
  INVAR_CHECK(b >= 0 && b < blocks_.made() && indexed(b), "block " + std::to_string(b));
  if (meta_[static_cast<size_t>(b)].ref++ == 0) {
    --unreferenced_indexed_;
    ++referenced_;
  }
  useless_update(b);
}

int64_t PrefixCache::blocks_obtainable() const {
  const int64_t free_bytes = cfg_.cache_bytes - blocks_used_ * budget_.block_bytes() -
                             checkpoints_used_ * budget_.checkpoint_bytes() +
                             unreferenced_indexed_ * budget_.block_bytes() +
                             attached_.size() * budget_.checkpoint_bytes();
  return free_bytes / budget_.block_bytes();
}

CacheStats PrefixCache::stats() const {
  CacheStats s;
  s.blocks_capacity = budget_.blocks_max;
  s.blocks_resident = blocks_used_;
  s.blocks_referenced = referenced_;
  s.blocks_indexed = static_cast<int64_t>(index_.size());
  s.checkpoints_resident = checkpoints_used_;
  s.bytes_kv = blocks_used_ * budget_.block_kv_bytes;
  s.bytes_checkpoints = checkpoints_used_ * budget_.checkpoint_state_bytes;
  s.bytes_metadata =
      blocks_used_ * budget_.block_meta_bytes + checkpoints_used_ * budget_.checkpoint_meta_bytes;
  s.bytes_resident = s.bytes_kv + s.bytes_checkpoints + s.bytes_metadata;
  s.evicted_blocks = evicted_blocks_;
  s.evicted_checkpoints = evicted_checkpoints_;
  s.lookups = lookups_;
  s.hits = hits_;
  s.hit_tokens = hit_tokens_;
  s.collisions = collisions_;
  s.block_ids = blocks_.made();
  s.checkpoint_ids = checkpoints_.made();
  s.bytes_tables = capacity_bytes(meta_) + capacity_bytes(tokens_) + capacity_bytes(owner_) +
                   useless_.bytes_tables() + attached_.bytes_tables() + blocks_.bytes_tables() +
                   checkpoints_.bytes_tables();
  s.compactions = compactions_;
  s.blocks_moved = blocks_moved_;
  s.checkpoints_moved = checkpoints_moved_;
  s.budget = budget_;
  return s;
}

void PrefixCache::check_invariants() const {
  blocks_.check_invariants();
  checkpoints_.check_invariants();
  useless_.check_invariants();
  attached_.check_invariants();
  INVAR_CHECK(blocks_.in_use() == blocks_used_ && checkpoints_.in_use() == checkpoints_used_,
              "arenas and charges disagree");
  // Every table has one row per id made, no more: they shrink with the arenas.
  INVAR_CHECK(static_cast<int64_t>(meta_.size()) == blocks_.made() &&
                  static_cast<int64_t>(tokens_.size()) == blocks_.made() * cfg_.block_size &&
                  static_cast<int64_t>(owner_.size()) == checkpoints_.made(),
              "tables and arenas disagree");
  const int64_t used =
      blocks_used_ * budget_.block_bytes() + checkpoints_used_ * budget_.checkpoint_bytes();
  INVAR_CHECK(used <= cfg_.cache_bytes, std::to_string(used) + " bytes charged");
  INVAR_CHECK(blocks_.bytes_warm() + checkpoints_.bytes_warm() <= cfg_.cache_bytes,
              "free slots hold more memory than the budget");
  INVAR_CHECK(static_cast<int64_t>(index_.size()) <= blocks_.in_use());
  std::vector<int32_t> children(meta_.size(), 0);
  int64_t unreferenced = 0;
  for (const auto& [key, b] : index_) {
    const BlockMeta& m = meta_[static_cast<size_t>(b)];
    INVAR_CHECK(m.stage == kIndexed && m.key == key, "index entry " + std::to_string(b));
    if (m.parent >= 0) {
      // Every resident prefix is complete: the parent is indexed under the parent key.
      INVAR_CHECK(indexed(m.parent), "orphan block " + std::to_string(b));
      INVAR_CHECK(meta_[static_cast<size_t>(m.parent)].key == m.parent_key);
      ++children[static_cast<size_t>(m.parent)];
    }
    if (m.ref == 0) ++unreferenced;
    if (m.checkpoint >= 0)
      INVAR_CHECK(owner_[static_cast<size_t>(m.checkpoint)] == b &&
                  attached_.contains(m.checkpoint));
    const bool useless = m.ref == 0 && m.n_children == 0 && m.checkpoint < 0;
    INVAR_CHECK(useless == useless_.contains(b), "useless list " + std::to_string(b));
  }
  INVAR_CHECK(unreferenced == unreferenced_indexed_);
  int64_t referenced = 0;
  for (size_t b = 0; b < meta_.size(); ++b) {
    const BlockMeta& m = meta_[b];
    referenced += m.ref > 0;
    INVAR_CHECK(children[b] == m.n_children, "children of " + std::to_string(b));
    // An id is in use exactly while a request holds it or the index finds it.
    INVAR_CHECK(blocks_.used(static_cast<int32_t>(b)) == (m.ref > 0 || m.stage == kIndexed),
                "block " + std::to_string(b) + " in use by nothing, or freed while held");
    if (m.stage != kIndexed)
      INVAR_CHECK(m.checkpoint < 0 && !useless_.contains(static_cast<int32_t>(b)));
  }
  INVAR_CHECK(referenced == referenced_);
  int64_t attached = 0;
  for (size_t c = 0; c < owner_.size(); ++c)
    if (owner_[c] >= 0) {
      INVAR_CHECK(checkpoints_.used(static_cast<int32_t>(c)), "freed checkpoint attached");
      ++attached;
      INVAR_CHECK(meta_[static_cast<size_t>(owner_[c])].checkpoint == static_cast<int32_t>(c));
    }
  INVAR_CHECK(attached == attached_.size());
}

}  // namespace invar
