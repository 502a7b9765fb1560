// The per-deployment secret of the prefix cache and its lower tiers (docs/security.md). Whoever
// can write the disk or Redis tier must not decide an answer, nor read a prompt back: every record
// is sealed with AES-256-GCM under a key derived from this secret, filed under a name derived from
// it, and the chain keys the names come from start at a salt key hashed with it. Without the
// secret a record can be neither forged, edited, planted under a name a request will look up,
// nor read. A new secret (rotation) makes every old record unreachable: its name is never looked
// up, and were it met, its seal would not verify.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace invar {

struct TierConfig;

using SecretKey = std::array<unsigned char, 32>;

struct TierSecret {
  SecretKey chain{};   // keys the salt key of every chain (prefix_cache.h): unguessable chain keys
  SecretKey name{};    // maps a chain key to the name its record is filed under
  SecretKey seal{};    // AES-256-GCM key of every record
  std::string id;      // 16 hex digits naming the secret in the log (a hash of it, not it)
  std::string origin;  // where it came from, for the start-up line
};

// The secret's parts from the master bytes (HMAC-SHA256 with a label per part).
TierSecret tier_secret_derive(std::span<const unsigned char> master, std::string origin);
// --cache-tier-key FILE: at least 32 bytes of secret (raw, or hex/base64 text: the file's bytes,
// a trailing newline dropped, are the master). Throws Error for a missing, short, or group- or
// world-writable file.
TierSecret tier_secret_load(const std::string& path);
// A lone --cache-dir: DIR/tier.key, made with 32 random bytes (mode 0600) by the first process
// and read by the others.
TierSecret tier_secret_for_dir(const std::string& cache_dir);
// No tier: a secret of this process alone (the memory cache lives and dies with it).
TierSecret tier_secret_random();
// What the tiers of cfg use: --cache-tier-key when given (required with --cache-redis, which
// other machines share), else DIR/tier.key of --cache-dir, else a random one. Throws Error.
TierSecret tier_secret_resolve(const TierConfig& cfg);

// HMAC-SHA256(key, label ‖ 0 ‖ bytes) truncated to 64 bits: a keyed hash that cannot be computed,
// nor aimed at a chosen value, without the key.
uint64_t keyed_hash64(const SecretKey& key, std::string_view label,
                      std::span<const unsigned char> bytes);

}  // namespace invar
