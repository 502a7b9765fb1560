#include "cache/tier_bridge.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace invar {

namespace {

BlockHidden hidden_of(const CacheConfig& c) {
  BlockHidden h;
  h.kv_floats = c.block_floats;
  h.block_size = c.block_size;
  h.n_embd = c.hidden_floats > 0 ? (c.hidden_floats - 1) / c.block_size : 0;
  return h;
}

}  // namespace

TierBridge::TierBridge(PrefixCache& cache, LowerTiers& tiers)
    : cache_(cache), tiers_(tiers), hidden_(hidden_of(cache.config())) {
  const CacheConfig& c = cache.config();
  const TierShape& s = tiers.shape();
  INVAR_CHECK(c.block_size == s.block_size && c.block_floats == s.block_floats &&
              c.state_floats == s.state_floats && c.key_bits == 64 &&
              hidden_.floats() == c.hidden_floats &&
              (hidden_.on() ? hidden_.row_floats() : 0) == s.hidden_floats);
  cache_.index_listen([this](const BlockIndexed& e) { offer(e); });
}

TierBridge::~TierBridge() {
  cache_.index_listen(nullptr);
}

void TierBridge::offer(const BlockIndexed& e) {
  if (restoring_) return;
  const CacheConfig& c = cache_.config();
  TierBlock b;
  b.key = e.key;
  b.parent_key = e.parent_key;
  b.tokens = e.tokens;
  const float* data = cache_.block_data(e.block);
  b.kv = {data, static_cast<size_t>(c.block_floats)};
  if (hidden_.on() && hidden_.present(data))
    b.hidden = {hidden_.rows(data), static_cast<size_t>(hidden_.row_floats())};
  b.checkpoint = e.checkpoint >= 0;
  if (b.checkpoint)
    b.state = {cache_.checkpoint_data(e.checkpoint), static_cast<size_t>(c.state_floats)};
  tiers_.block_offer(b);
}

int64_t TierBridge::restore(std::span<const int32_t> tokens, std::string_view salt,
                            int64_t max_tokens) {
  const int64_t bs = cache_.config().block_size;
  const int64_t n_full = std::min<int64_t>(static_cast<int64_t>(tokens.size()), max_tokens) / bs;
  const PrefixHit hit = cache_.lookup(tokens, salt, max_tokens);
  const auto m = static_cast<int64_t>(hit.blocks.size());
  if (m >= n_full) return 0;
  cache_.chain_keys(tokens, salt, n_full, keys_);
  const auto n_ask = static_cast<size_t>(n_full - m);
  const std::vector<FetchedBlock> got = tiers_.prefix_fetch(
      std::span<const uint64_t>(keys_).subspan(static_cast<size_t>(m) + 1, n_ask),
      std::span<const uint64_t>(keys_).subspan(static_cast<size_t>(m), n_ask),
      tokens.subspan(static_cast<size_t>(m * bs), n_ask * static_cast<size_t>(bs)));
  size_t usable = 0;  // a restored run is useful up to its last checkpoint
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i].block.checkpoint) usable = i + 1;
  if (usable == 0) return 0;

  // The memory hit's blocks are pinned so that making room for the restored ones cannot evict
  // the prefix they extend.
  table_ = hit.blocks;
  for (int32_t b : table_) cache_.block_pin(b);
  restoring_ = true;
  int64_t restored = 0;
  for (size_t i = 0; i < usable; ++i) {
    const TierBlock& tb = got[i].block;
    const int32_t b = cache_.block_acquire();
    if (b < 0) break;
    float* data = cache_.block_data(b);
    if (!tb.kv.empty()) std::memcpy(data, tb.kv.data(), tb.kv.size_bytes());
    if (hidden_.on()) {
      hidden_.present_set(data, !tb.hidden.empty());
      if (!tb.hidden.empty())
        std::memcpy(hidden_.rows(data), tb.hidden.data(), tb.hidden.size_bytes());
    }
    int32_t c = -1;
    if (tb.checkpoint) {
      c = cache_.checkpoint_acquire();
      if (c >= 0 && !tb.state.empty())
        std::memcpy(cache_.checkpoint_data(c), tb.state.data(), tb.state.size_bytes());
    }
    table_.push_back(b);
    cache_.block_commit(table_, m + static_cast<int64_t>(i), tokens, salt, c);
    ++restored;
  }
  restoring_ = false;
  for (int32_t b : table_) cache_.block_release(b);
  restored_tokens_ += restored * bs;
  return restored * bs;
}

}  // namespace invar
