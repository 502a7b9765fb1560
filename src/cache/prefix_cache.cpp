#include "cache/prefix_cache.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.h"

namespace invar {

namespace {

int64_t slots_for(int64_t budget, int64_t slot_floats) {
  const int64_t stride_bytes = std::max<int64_t>((slot_floats + 15) / 16 * 16, 16) * 4;
  return std::min<int64_t>(budget / stride_bytes, (int64_t{1} << 31) - 1);
}

}  // namespace

PrefixCache::PrefixCache(const CacheConfig& cfg)
    : cfg_(cfg),
      blocks_(cfg.block_floats, slots_for(cfg.cache_bytes, cfg.block_floats)),
      checkpoints_(cfg.state_floats, slots_for(cfg.cache_bytes, cfg.state_floats)),
      useless_(blocks_.capacity()),
      attached_(checkpoints_.capacity()) {
  INVAR_CHECK(cfg.block_size > 0 && cfg.checkpoint_every > 0 && cfg.cache_bytes >= 0);
  const auto nb = static_cast<size_t>(blocks_.capacity());
  ref_.assign(nb, 0);
  indexed_.assign(nb, 0);
  key_.assign(nb, 0);
  parent_key_.assign(nb, 0);
  parent_.assign(nb, -1);
  n_children_.assign(nb, 0);
  checkpoint_.assign(nb, -1);
  tokens_.assign(nb * static_cast<size_t>(cfg.block_size), 0);
  owner_.assign(static_cast<size_t>(checkpoints_.capacity()), -1);
  index_.reserve(nb);
}

uint64_t PrefixCache::salt_key(std::string_view salt) {
  // A fixed seed keeps the unsalted chain distinct from a chain salted with "".
  return XXH3_64bits_withSeed(salt.data(), salt.size(), 0x696e766172ull /* "invar" */);
}

uint64_t PrefixCache::block_key(uint64_t parent_key, std::span<const int32_t> tokens) {
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), parent_key);
}

bool PrefixCache::tokens_equal(int32_t b, std::span<const int32_t> tokens) const {
  const int32_t* stored = tokens_.data() + static_cast<size_t>(b) * cfg_.block_size;
  return static_cast<int64_t>(tokens.size()) == cfg_.block_size &&
         std::memcmp(stored, tokens.data(), tokens.size_bytes()) == 0;
}

PrefixHit PrefixCache::lookup(std::span<const int32_t> tokens, uint64_t salt,
                              int64_t max_tokens) const {
  PrefixHit hit;
  const int64_t bs = cfg_.block_size;
  const int64_t n_full = std::min<int64_t>(static_cast<int64_t>(tokens.size()), max_tokens) / bs;
  uint64_t parent_key = salt;
  int32_t parent = -1;
  int64_t usable = 0;  // blocks up to the last one carrying a checkpoint
  for (int64_t i = 0; i < n_full; ++i) {
    const auto block_tokens = tokens.subspan(static_cast<size_t>(i * bs), static_cast<size_t>(bs));
    const uint64_t key = block_key(parent_key, block_tokens);
    const auto it = index_.find(key);
    if (it == index_.end()) break;
    const int32_t b = it->second;
    // A key match is only a claim: the tokens and the parent must match too.
    if (!tokens_equal(b, block_tokens) || parent_[static_cast<size_t>(b)] != parent ||
        parent_key_[static_cast<size_t>(b)] != parent_key)
      break;
    hit.blocks.push_back(b);
    hit.keys.push_back(key);
    if (checkpoint_[static_cast<size_t>(b)] >= 0) {
      usable = i + 1;
      hit.checkpoint = checkpoint_[static_cast<size_t>(b)];
    }
    parent_key = key;
    parent = b;
  }
  hit.blocks.resize(static_cast<size_t>(usable));
  hit.keys.resize(static_cast<size_t>(usable));
  hit.n_tokens = usable * bs;
  if (usable == 0) hit.checkpoint = -1;
  return hit;
}

void PrefixCache::hit_apply(const PrefixHit& hit, float* state) {
  ++lookups_;
  if (hit.n_tokens == 0) return;
  INVAR_CHECK(
      hit.checkpoint >= 0 && owner_[static_cast<size_t>(hit.checkpoint)] == hit.blocks.back(),
      "stale prefix hit");
  ++hits_;
  hit_tokens_ += hit.n_tokens;
  for (int32_t b : hit.blocks) {
    INVAR_CHECK(indexed_[static_cast<size_t>(b)], "stale prefix hit");
    if (ref_[static_cast<size_t>(b)]++ == 0) {
      --unreferenced_indexed_;
      ++referenced_;
    }
    useless_update(b);
  }
  std::memcpy(state, checkpoints_.data(hit.checkpoint),
              static_cast<size_t>(cfg_.state_floats) * sizeof(float));
  attached_.touch(hit.checkpoint);
}

bool PrefixCache::room_make(int64_t bytes) {
  while (bytes_used_ + bytes > cfg_.cache_bytes) {
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

void PrefixCache::block_evict(int32_t b) {
  const auto ub = static_cast<size_t>(b);
  INVAR_CHECK(indexed_[ub] && ref_[ub] == 0 && n_children_[ub] == 0 && checkpoint_[ub] < 0);
  useless_.remove(b);
  index_.erase(key_[ub]);
  indexed_[ub] = 0;
  --unreferenced_indexed_;
  const int32_t p = parent_[ub];
  parent_[ub] = -1;
  if (p >= 0) {
    --n_children_[static_cast<size_t>(p)];
    useless_update(p);
  }
  blocks_.release(b);
  bytes_used_ -= blocks_.slot_bytes();
  ++evicted_blocks_;
}

void PrefixCache::checkpoint_evict(int32_t c) {
  const int32_t b = owner_[static_cast<size_t>(c)];
  INVAR_CHECK(b >= 0 && checkpoint_[static_cast<size_t>(b)] == c);
  attached_.remove(c);
  checkpoint_[static_cast<size_t>(b)] = -1;
  owner_[static_cast<size_t>(c)] = -1;
  checkpoints_.release(c);
  bytes_used_ -= checkpoints_.slot_bytes();
  ++evicted_checkpoints_;
  useless_update(b);
}

void PrefixCache::checkpoint_attach(int32_t b, int32_t c) {
  checkpoint_[static_cast<size_t>(b)] = c;
  owner_[static_cast<size_t>(c)] = b;
  attached_.push_back(c);
  useless_update(b);
}

void PrefixCache::useless_update(int32_t b) {
  const auto ub = static_cast<size_t>(b);
  const bool useless = indexed_[ub] && ref_[ub] == 0 && n_children_[ub] == 0 && checkpoint_[ub] < 0;
  if (useless && !useless_.contains(b)) useless_.push_back(b);
  if (!useless && useless_.contains(b)) useless_.remove(b);
}

int32_t PrefixCache::block_acquire() {
  if (!room_make(blocks_.slot_bytes())) return -1;
  const int32_t b = blocks_.acquire();
  INVAR_CHECK(b >= 0, "block arena smaller than the byte budget");
  bytes_used_ += blocks_.slot_bytes();
  ref_[static_cast<size_t>(b)] = 1;
  ++referenced_;
  return b;
}

void PrefixCache::block_release(int32_t b) {
  const auto ub = static_cast<size_t>(b);
  INVAR_CHECK(b >= 0 && b < blocks_.capacity() && ref_[ub] > 0, "block " + std::to_string(b));
  if (--ref_[ub] > 0) return;
  --referenced_;
  if (indexed_[ub]) {
    // Stays findable until evicted (STYLE 8); its release time orders eviction.
    ++unreferenced_indexed_;
    useless_update(b);
    if (checkpoint_[ub] >= 0) attached_.touch(checkpoint_[ub]);
  } else {
    blocks_.release(b);
    bytes_used_ -= blocks_.slot_bytes();
  }
}

int32_t PrefixCache::checkpoint_acquire() {
  if (!room_make(checkpoints_.slot_bytes())) return -1;
  const int32_t c = checkpoints_.acquire();
  INVAR_CHECK(c >= 0, "checkpoint arena smaller than the byte budget");
  bytes_used_ += checkpoints_.slot_bytes();
  owner_[static_cast<size_t>(c)] = -1;
  return c;
}

void PrefixCache::checkpoint_release(int32_t c) {
  INVAR_CHECK(c >= 0 && owner_[static_cast<size_t>(c)] == -1, "checkpoint " + std::to_string(c));
  checkpoints_.release(c);
  bytes_used_ -= checkpoints_.slot_bytes();
}

void PrefixCache::block_commit(int32_t block, int64_t index, uint64_t parent_key, uint64_t key,
                               std::span<const int32_t> tokens, int32_t checkpoint) {
  const auto ub = static_cast<size_t>(block);
  INVAR_CHECK(ref_[ub] > 0 && !indexed_[ub], "block " + std::to_string(block));
  INVAR_CHECK(static_cast<int64_t>(tokens.size()) == cfg_.block_size);
  auto give_back = [&] {
    if (checkpoint >= 0) checkpoint_release(checkpoint);
  };
  if (const auto it = index_.find(key); it != index_.end()) {
    const int32_t twin = it->second;
    if (tokens_equal(twin, tokens) && parent_key_[static_cast<size_t>(twin)] == parent_key) {
      if (checkpoint >= 0 && checkpoint_[static_cast<size_t>(twin)] < 0) {
        checkpoint_attach(twin, checkpoint);
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
  indexed_[ub] = 1;
  key_[ub] = key;
  parent_key_[ub] = parent_key;
  parent_[ub] = parent;
  std::memcpy(tokens_.data() + ub * static_cast<size_t>(cfg_.block_size), tokens.data(),
              tokens.size_bytes());
  index_.emplace(key, block);
  if (parent >= 0) {
    ++n_children_[static_cast<size_t>(parent)];
    useless_update(parent);
  }
  if (checkpoint >= 0) checkpoint_attach(block, checkpoint);
}

int64_t PrefixCache::blocks_obtainable() const {
  const int64_t free_bytes = cfg_.cache_bytes - bytes_used_ +
                             unreferenced_indexed_ * blocks_.slot_bytes() +
                             attached_.size() * checkpoints_.slot_bytes();
  return free_bytes / blocks_.slot_bytes();
}

CacheStats PrefixCache::stats() const {
  CacheStats s;
  s.blocks_capacity = blocks_.capacity();
  s.blocks_resident = blocks_.in_use();
  s.blocks_referenced = referenced_;
  s.blocks_indexed = static_cast<int64_t>(index_.size());
  s.checkpoints_resident = checkpoints_.in_use();
  s.bytes_resident = bytes_used_;
  s.evicted_blocks = evicted_blocks_;
  s.evicted_checkpoints = evicted_checkpoints_;
  s.lookups = lookups_;
  s.hits = hits_;
  s.hit_tokens = hit_tokens_;
  s.collisions = collisions_;
  return s;
}

void PrefixCache::check_invariants() const {
  const int64_t used =
      blocks_.in_use() * blocks_.slot_bytes() + checkpoints_.in_use() * checkpoints_.slot_bytes();
  INVAR_CHECK(used == bytes_used_, std::to_string(used) + " vs " + std::to_string(bytes_used_));
  INVAR_CHECK(bytes_used_ <= cfg_.cache_bytes);
  INVAR_CHECK(static_cast<int64_t>(index_.size()) <= blocks_.in_use());
  std::vector<int32_t> children(ref_.size(), 0);
  int64_t unreferenced = 0;
  for (const auto& [key, b] : index_) {
    const auto ub = static_cast<size_t>(b);
    INVAR_CHECK(indexed_[ub] && key_[ub] == key, "index entry " + std::to_string(b));
    if (parent_[ub] >= 0) {
      // Every resident prefix is complete: the parent is indexed under the parent key.
      INVAR_CHECK(indexed_[static_cast<size_t>(parent_[ub])], "orphan block " + std::to_string(b));
      INVAR_CHECK(key_[static_cast<size_t>(parent_[ub])] == parent_key_[ub]);
      ++children[static_cast<size_t>(parent_[ub])];
    }
    if (ref_[ub] == 0) ++unreferenced;
    const int32_t c = checkpoint_[ub];
    if (c >= 0) INVAR_CHECK(owner_[static_cast<size_t>(c)] == b && attached_.contains(c));
    const bool useless = ref_[ub] == 0 && n_children_[ub] == 0 && c < 0;
    INVAR_CHECK(useless == useless_.contains(b), "useless list " + std::to_string(b));
  }
  INVAR_CHECK(unreferenced == unreferenced_indexed_);
  int64_t referenced = 0;
  for (int32_t r : ref_) referenced += r > 0;
  INVAR_CHECK(referenced == referenced_);
  for (size_t b = 0; b < ref_.size(); ++b) {
    INVAR_CHECK(children[b] == n_children_[b], "children of " + std::to_string(b));
    if (!indexed_[b])
      INVAR_CHECK(checkpoint_[b] < 0 && !useless_.contains(static_cast<int32_t>(b)));
  }
  int64_t attached = 0;
  for (size_t c = 0; c < owner_.size(); ++c)
    if (owner_[c] >= 0) {
      ++attached;
      INVAR_CHECK(checkpoint_[static_cast<size_t>(owner_[c])] == static_cast<int32_t>(c));
    }
  INVAR_CHECK(attached == attached_.size());
}

}  // namespace invar
