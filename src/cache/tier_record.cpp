#include "cache/tier_record.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cstring>
#include <memory>

#include "core/error.h"

namespace invar {

namespace {

// The sealed record: magic, version and nonce in clear, the encrypted record, the GCM tag.
constexpr char kMagic[8] = {'I', 'N', 'V', 'A', 'R', 'T', 'B', '2'};
constexpr uint32_t kVersion = 2;
constexpr size_t kNonceBytes = 12, kTagBytes = 16;
constexpr size_t kPrefixBytes = sizeof kMagic + sizeof(uint32_t) + kNonceBytes;  // 24
constexpr size_t kFingerprintBytes = 64;

// The encrypted record's fixed header; tokens, KV floats, state floats and hidden floats follow.
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
  uint64_t record_bytes;  // the whole sealed record
};
static_assert(sizeof(RecordHeader) == 128);
constexpr size_t kSealBytes = kPrefixBytes + kTagBytes;
constexpr uint32_t kHasState = 1, kHasHidden = 2;

struct CipherFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using Cipher = std::unique_ptr<EVP_CIPHER_CTX, CipherFree>;

// What the tag covers besides the ciphertext: the clear prefix's magic and version, and the
// name the record is filed under (a record moved to another name does not verify there).
std::array<unsigned char, 20> aad_of(const char* prefix, uint64_t name) {
  std::array<unsigned char, 20> aad{};
  std::memcpy(aad.data(), prefix, 12);
  std::memcpy(aad.data() + 12, &name, sizeof name);
  return aad;
}

}  // namespace

std::string tier_key_hex(uint64_t name) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, name >>= 4) s[static_cast<size_t>(i)] = digits[name & 15];
  return s;
}

uint64_t tier_record_name(const TierSecret& secret, uint64_t key) {
  unsigned char bytes[sizeof key];
  std::memcpy(bytes, &key, sizeof key);
  return keyed_hash64(secret.name, "record name", bytes);
}

int64_t tier_record_bytes(const TierShape& shape, bool with_state, bool with_hidden) {
  return static_cast<int64_t>(kSealBytes + sizeof(RecordHeader)) +
         shape.block_size * static_cast<int64_t>(sizeof(int32_t)) +
         (shape.block_floats + (with_state ? shape.state_floats : 0) +
          (with_hidden ? shape.hidden_floats : 0)) *
             static_cast<int64_t>(sizeof(float));
}

int64_t tier_record_bytes_max(const TierShape& shape) {
  // A reader with no hidden rows of its own still takes records with some: at most one row of
  // 64 Ki floats per token (no supported model is wider).
  const int64_t hidden_max = shape.hidden_floats > 0 ? 0 : shape.block_size * (int64_t{1} << 16);
  return tier_record_bytes(shape, true, true) + hidden_max * static_cast<int64_t>(sizeof(float));
}

void tier_record_encode(const TierShape& shape, const TierBlock& block, std::vector<char>& out) {
  INVAR_CHECK(
      shape.fingerprint.size() <= kFingerprintBytes &&
      static_cast<int64_t>(block.tokens.size()) == shape.block_size &&
      static_cast<int64_t>(block.kv.size()) == shape.block_floats &&
      static_cast<int64_t>(block.state.size()) == (block.checkpoint ? shape.state_floats : 0) &&
      (block.hidden.empty() || static_cast<int64_t>(block.hidden.size()) == shape.hidden_floats));
  const bool with_state = block.checkpoint, with_hidden = !block.hidden.empty();
  const auto total = static_cast<size_t>(tier_record_bytes(shape, with_state, with_hidden));
  out.resize(total);
  std::memset(out.data(), 0, kPrefixBytes);
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  std::memcpy(out.data() + sizeof kMagic, &kVersion, sizeof kVersion);
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
  char* p = out.data() + kPrefixBytes;
  std::memcpy(p, &h, sizeof h);
  p += sizeof h;
  std::memcpy(p, block.tokens.data(), block.tokens.size_bytes());
  p += block.tokens.size_bytes();
  std::memcpy(p, block.kv.data(), block.kv.size_bytes());
  p += block.kv.size_bytes();
  if (with_state) std::memcpy(p, block.state.data(), block.state.size_bytes());
  p += block.state.size_bytes();
  if (with_hidden) std::memcpy(p, block.hidden.data(), block.hidden.size_bytes());
}

void tier_record_seal(const TierSecret& secret, uint64_t name, std::vector<char>& record) {
  INVAR_CHECK(record.size() >= kSealBytes + sizeof(RecordHeader));
  auto* bytes = reinterpret_cast<unsigned char*>(record.data());
  unsigned char* nonce = bytes + kPrefixBytes - kNonceBytes;
  // A fresh random nonce per sealing: 96 random bits, far from a repeat at any record count a
  // key will see.
  INVAR_CHECK(RAND_bytes(nonce, static_cast<int>(kNonceBytes)) == 1);
  const auto aad = aad_of(record.data(), name);
  const int n = static_cast<int>(record.size() - kSealBytes);
  Cipher c(EVP_CIPHER_CTX_new());
  int len = 0;
  INVAR_CHECK(
      c &&
      EVP_EncryptInit_ex(c.get(), EVP_aes_256_gcm(), nullptr, secret.seal.data(), nonce) == 1 &&
      EVP_EncryptUpdate(c.get(), nullptr, &len, aad.data(), static_cast<int>(aad.size())) == 1 &&
      EVP_EncryptUpdate(c.get(), bytes + kPrefixBytes, &len, bytes + kPrefixBytes, n) == 1 &&
      EVP_EncryptFinal_ex(c.get(), bytes + kPrefixBytes + len, &len) == 1 &&
      EVP_CIPHER_CTX_ctrl(c.get(), EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTagBytes),
                          bytes + record.size() - kTagBytes) == 1);
}

RecordCheck tier_record_open(const TierSecret& secret, const TierShape& shape,
                             std::span<const char> sealed, uint64_t name, uint64_t key,
                             uint64_t parent_key, std::span<const int32_t> tokens,
                             std::vector<char>& plain, TierBlock& block) {
  if (sealed.size() < kSealBytes + sizeof(RecordHeader) ||
      static_cast<int64_t>(sealed.size()) > tier_record_bytes_max(shape) ||
      std::memcmp(sealed.data(), kMagic, sizeof kMagic) != 0)
    return RecordCheck::corrupt;
  uint32_t version;
  std::memcpy(&version, sealed.data() + sizeof kMagic, sizeof version);
  if (version != kVersion) return RecordCheck::corrupt;
  // Verify before anything of it is believed: the tag covers every byte and the name.
  const auto* in = reinterpret_cast<const unsigned char*>(sealed.data());
  const auto aad = aad_of(sealed.data(), name);
  const int n = static_cast<int>(sealed.size() - kSealBytes);
  plain.resize(static_cast<size_t>(n));
  unsigned char tag[kTagBytes];
  std::memcpy(tag, in + sealed.size() - kTagBytes, kTagBytes);
  Cipher c(EVP_CIPHER_CTX_new());
  INVAR_CHECK(c != nullptr);
  int len = 0;
  auto* out = reinterpret_cast<unsigned char*>(plain.data());
  const bool authentic =
      EVP_DecryptInit_ex(c.get(), EVP_aes_256_gcm(), nullptr, secret.seal.data(),
                         in + kPrefixBytes - kNonceBytes) == 1 &&
      EVP_DecryptUpdate(c.get(), nullptr, &len, aad.data(), static_cast<int>(aad.size())) == 1 &&
      EVP_DecryptUpdate(c.get(), out, &len, in + kPrefixBytes, n) == 1 &&
      EVP_CIPHER_CTX_ctrl(c.get(), EVP_CTRL_GCM_SET_TAG, static_cast<int>(kTagBytes), tag) == 1 &&
      EVP_DecryptFinal_ex(c.get(), out + len, &len) == 1;
  if (!authentic) return RecordCheck::corrupt;

  RecordHeader h;
  std::memcpy(&h, plain.data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.version != kVersion ||
      h.record_bytes != sealed.size())
    return RecordCheck::corrupt;
  // A whole record from another model, another block shape or filed under the wrong name. The
  // hidden rows are what is left after the state: a reader that wants them knows their size
  // (same fingerprint, same model), one that wants none skips them.
  const bool with_state = (h.flags & kHasState) != 0, with_hidden = (h.flags & kHasHidden) != 0;
  const int64_t base = tier_record_bytes(shape, with_state);
  const auto hidden_bytes = static_cast<int64_t>(sealed.size()) - base;
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
  const char* p = plain.data() + sizeof h;
  if (h.parent_key != parent_key || tokens.size() != h.n_tokens ||
      std::memcmp(p, tokens.data(), tokens.size_bytes()) != 0)
    return RecordCheck::mismatch;
  // plain is a malloc'd buffer and every section starts at a multiple of 4 bytes.
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
