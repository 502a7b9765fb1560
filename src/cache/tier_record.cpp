#include "cache/tier_record.h"

#include <xxhash.h>

#include <cstring>

#include "core/error.h"

namespace invar {

namespace {

constexpr char kMagic[8] = {'I', 'N', 'V', 'A', 'R', 'T', 'B', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kFingerprintBytes = 64;

// The fixed header; tokens, KV floats, state floats, hidden floats and the XXH3-64 checksum
// follow.
struct RecordHeader {
  char magic[8];
  uint32_t version;
  uint32_t fingerprint_len;
  char fingerprint[kFingerprintBytes];  // zero-padded
  uint64_t key;
  uint64_t parent_key;
  uint32_t n_tokens;
  uint32_t flags;  // kHasState | kHasHidden
  uint64_t kv_floats;
  uint64_t state_floats;
  uint64_t record_bytes;  // the whole record, checksum included
};
static_assert(sizeof(RecordHeader) == 128);
constexpr size_t kChecksumBytes = sizeof(uint64_t);
constexpr uint32_t kHasState = 1, kHasHidden = 2;

}  // namespace

std::string tier_key_hex(uint64_t key) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, key >>= 4) s[static_cast<size_t>(i)] = digits[key & 15];
  return s;
}

int64_t tier_record_bytes(const TierShape& shape, bool with_state, bool with_hidden) {
  return static_cast<int64_t>(sizeof(RecordHeader) + kChecksumBytes) +
         shape.block_size * static_cast<int64_t>(sizeof(int32_t)) +
         (shape.block_floats + (with_state ? shape.state_floats : 0) +
          (with_hidden ? shape.hidden_floats : 0)) *
             static_cast<int64_t>(sizeof(float));
}

void tier_record_encode(const TierShape& shape, const TierBlock& block, std::vector<char>& out,
                        bool seal) {
  INVAR_CHECK(
      shape.fingerprint.size() <= kFingerprintBytes &&
      static_cast<int64_t>(block.tokens.size()) == shape.block_size &&
      static_cast<int64_t>(block.kv.size()) == shape.block_floats &&
      static_cast<int64_t>(block.state.size()) == (block.checkpoint ? shape.state_floats : 0) &&
      (block.hidden.empty() || static_cast<int64_t>(block.hidden.size()) == shape.hidden_floats));
  const bool with_state = block.checkpoint, with_hidden = !block.hidden.empty();
  const auto total = static_cast<size_t>(tier_record_bytes(shape, with_state, with_hidden));
  out.resize(total);
  RecordHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.fingerprint_len = static_cast<uint32_t>(shape.fingerprint.size());
  std::memcpy(h.fingerprint, shape.fingerprint.data(), shape.fingerprint.size());
  h.key = block.key;
  h.parent_key = block.parent_key;
  h.n_tokens = static_cast<uint32_t>(block.tokens.size());
  h.flags = (with_state ? kHasState : 0) | (with_hidden ? kHasHidden : 0);
  h.kv_floats = block.kv.size();
  h.state_floats = block.state.size();
  h.record_bytes = total;
  char* p = out.data();
  std::memcpy(p, &h, sizeof h);
  p += sizeof h;
  std::memcpy(p, block.tokens.data(), block.tokens.size_bytes());
  p += block.tokens.size_bytes();
  std::memcpy(p, block.kv.data(), block.kv.size_bytes());
  p += block.kv.size_bytes();
  if (with_state) std::memcpy(p, block.state.data(), block.state.size_bytes());
  p += block.state.size_bytes();
  if (with_hidden) std::memcpy(p, block.hidden.data(), block.hidden.size_bytes());
  if (seal) tier_record_seal(out);
}

void tier_record_seal(std::vector<char>& record) {
  INVAR_CHECK(record.size() >= sizeof(RecordHeader) + kChecksumBytes);
  const uint64_t sum = XXH3_64bits(record.data(), record.size() - kChecksumBytes);
  std::memcpy(record.data() + record.size() - kChecksumBytes, &sum, kChecksumBytes);
}

RecordCheck tier_record_check(const TierShape& shape, std::span<const char> bytes, uint64_t key,
                              uint64_t parent_key, std::span<const int32_t> tokens,
                              TierBlock& block) {
  RecordHeader h;
  if (bytes.size() < sizeof h + kChecksumBytes) return RecordCheck::corrupt;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.version != kVersion ||
      h.record_bytes != bytes.size())
    return RecordCheck::corrupt;
  uint64_t sum;
  std::memcpy(&sum, bytes.data() + bytes.size() - kChecksumBytes, kChecksumBytes);
  if (XXH3_64bits(bytes.data(), bytes.size() - kChecksumBytes) != sum) return RecordCheck::corrupt;
  // A whole record from another model, another block shape or filed under the wrong name. The
  // hidden rows are what is left between the state and the checksum: a reader that wants them
  // knows their size (same fingerprint, same model), one that wants none skips them.
  const bool with_state = (h.flags & kHasState) != 0, with_hidden = (h.flags & kHasHidden) != 0;
  const int64_t base = tier_record_bytes(shape, with_state);
  const auto hidden_bytes = static_cast<int64_t>(bytes.size()) - base;
  const bool hidden_ok =
      !with_hidden ? hidden_bytes == 0
      : shape.hidden_floats > 0
          ? hidden_bytes == shape.hidden_floats * static_cast<int64_t>(sizeof(float))
          : hidden_bytes > 0 && hidden_bytes % static_cast<int64_t>(sizeof(float)) == 0;
  if (h.fingerprint_len != shape.fingerprint.size() ||
      std::memcmp(h.fingerprint, shape.fingerprint.data(), shape.fingerprint.size()) != 0 ||
      h.n_tokens != static_cast<uint64_t>(shape.block_size) ||
      h.kv_floats != static_cast<uint64_t>(shape.block_floats) ||
      h.flags > (kHasState | kHasHidden) ||
      h.state_floats != (with_state ? static_cast<uint64_t>(shape.state_floats) : 0) ||
      !hidden_ok || h.key != key)
    return RecordCheck::corrupt;
  const char* p = bytes.data() + sizeof h;
  if (h.parent_key != parent_key || tokens.size() != h.n_tokens ||
      std::memcmp(p, tokens.data(), tokens.size_bytes()) != 0)
    return RecordCheck::mismatch;
  // Records live in malloc'd buffers and every section starts at a multiple of 4 bytes.
  block.key = h.key;
  block.parent_key = h.parent_key;
  block.tokens = {reinterpret_cast<const int32_t*>(p), h.n_tokens};
  p += tokens.size_bytes();
  block.kv = {reinterpret_cast<const float*>(p), h.kv_floats};
  p += h.kv_floats * sizeof(float);
  block.state = {reinterpret_cast<const float*>(p), h.state_floats};
  p += h.state_floats * sizeof(float);
  block.hidden = {};
  if (with_hidden && shape.hidden_floats > 0)
    block.hidden = {reinterpret_cast<const float*>(p), static_cast<size_t>(shape.hidden_floats)};
  block.checkpoint = with_state;
  return RecordCheck::ok;
}

}  // namespace invar
