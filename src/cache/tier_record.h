// One prefix-cache block as the lower tiers (disk, Redis) store it: a self-describing record
// that carries its own address and a checksum, so a reader can tell a whole, matching record
// from a truncated, corrupt or foreign one before anything reaches the cache (docs/cache-tiers.md
// gives the byte layout).
//
// A record holds full block i of a chain: its chain key and its parent's (the chain starts at
// the salt key, so the salt is part of every address), its tokens, its KV floats, when the
// block carries a checkpoint the recurrent state after its last token and, when the writer kept
// them (an MTP drafter: cache/block_hidden.h), the trunk's hidden rows. Readers check the
// checksum, the fingerprint and the shape, then the key, parent key and tokens they expected:
// the same tests the memory cache applies on a hit.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace invar {

// What every record of one model and one cache configuration shares.
struct TierShape {
  std::string fingerprint;   // system_fingerprint: model file + numerics version (≤ 64 bytes)
  int64_t block_size = 0;    // tokens per block
  int64_t block_floats = 0;  // KV floats per block
  int64_t state_floats = 0;  // floats per checkpoint
  // [block_size][n_embd] hidden rows the writer puts in records and the reader takes from them
  // (0: none written; records that carry some are read, their rows ignored).
  int64_t hidden_floats = 0;
};

// A block as views: into the cache's slots when offered, into a record when read back.
struct TierBlock {
  uint64_t key = 0;                 // chain key of this block
  uint64_t parent_key = 0;          // the previous block's key (the salt key for block 0)
  std::span<const int32_t> tokens;  // [block_size]
  std::span<const float> kv;        // [block_floats]
  std::span<const float> state;     // [state_floats] when checkpoint (empty for a stateless model)
  bool checkpoint = false;          // the block carries the state after its last token
  // [hidden_floats] the trunk's hidden rows of its positions; empty: absent (a record written
  // without them, or read by a shape that wants none).
  std::span<const float> hidden;
};

enum class RecordCheck {
  ok,
  corrupt,   // truncated, bad checksum, another model or shape, or filed under the wrong key
  mismatch,  // a whole record for this key, but another chain (parent or tokens differ)
};

// "%016x" of the key: the name a record is filed under in every tier.
std::string tier_key_hex(uint64_t key);
// Bytes of a record of this shape, with or without state and hidden rows.
int64_t tier_record_bytes(const TierShape& shape, bool with_state, bool with_hidden = false);
// Writes the record of `block` into out (resized; capacity kept between calls). seal = false
// leaves the checksum to tier_record_seal(), so that a caller can hash on another thread.
void tier_record_encode(const TierShape& shape, const TierBlock& block, std::vector<char>& out,
                        bool seal = true);
void tier_record_seal(std::vector<char>& record);
// Checks `bytes` as the record for (key, parent_key, tokens); on ok, `block` views into bytes.
RecordCheck tier_record_check(const TierShape& shape, std::span<const char> bytes, uint64_t key,
                              uint64_t parent_key, std::span<const int32_t> tokens,
                              TierBlock& block);

}  // namespace invar
