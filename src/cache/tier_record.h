// One prefix-cache block as the lower tiers (disk, Redis) store it: a sealed, self-describing
// record, so a reader can tell a whole, matching record written by a holder of the deployment's
// secret (tier_secret.h) from a truncated, corrupt, foreign, edited or planted one before
// anything reaches the cache (docs/cache-tiers.md gives the byte layout, docs/security.md the
// threat).
//
// A record holds full block i of a chain: its chain key and its parent's (the chain starts at
// the salt key, so the salt is part of every address), its tokens, its KV floats, when the
// block carries a checkpoint the recurrent state after its last token and, when the writer kept
// them (an MTP drafter: cache/block_hidden.h), the trunk's hidden rows. All of it is encrypted
// with AES-256-GCM; the tag covers it and the name the record is filed under, so neither a
// byte of it nor its place can change unseen, and without the key nothing of it can be read.
// Readers verify the tag, then the fingerprint and the shape, then the key, parent key and
// tokens they expected: the same tests the memory cache applies on a hit.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cache/tier_secret.h"

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
  // truncated, tag does not verify (edited, forged, another key), another model or shape, or
  // filed under the wrong name
  corrupt,
  mismatch,  // a whole, authentic record for this key, but another chain (parent or tokens differ)
};

// "%016x" of a name: what a record is filed under in every tier.
std::string tier_key_hex(uint64_t name);
// The name block `key` is filed under: a keyed hash of the chain key, so names cannot be
// computed (nor a record planted where a request will look) without the secret.
uint64_t tier_record_name(const TierSecret& secret, uint64_t key);
// Bytes of a sealed record of this shape, with or without state and hidden rows.
int64_t tier_record_bytes(const TierShape& shape, bool with_state, bool with_hidden = false);
// The largest record of this shape: readers refuse anything longer unread.
int64_t tier_record_bytes_max(const TierShape& shape);
// Writes the record of `block` into out (resized; capacity kept between calls), in clear:
// tier_record_seal() encrypts it, so that a caller can seal on another thread.
void tier_record_encode(const TierShape& shape, const TierBlock& block, std::vector<char>& out);
// Encrypts an encoded record in place under the secret for the name it is filed under.
void tier_record_seal(const TierSecret& secret, uint64_t name, std::vector<char>& record);
// Verifies and decrypts `sealed`, read under `name`, into plain (resized), then checks it as the
// record for (key, parent_key, tokens); on ok, `block` views into plain.
RecordCheck tier_record_open(const TierSecret& secret, const TierShape& shape,
                             std::span<const char> sealed, uint64_t name, uint64_t key,
                             uint64_t parent_key, std::span<const int32_t> tokens,
                             std::vector<char>& plain, TierBlock& block);

}  // namespace invar
