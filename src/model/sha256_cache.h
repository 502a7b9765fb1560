// The SHA-256 of a model file kept between starts, so that a server whose file has not changed
// does not read all of it once more before it answers (docs/memory.md, "Start-up").
//
// One small file per model file in DIR, named after the file's device and inode and holding
// its identity (device, inode, size, mtime, ctime, in nanoseconds) and its hash. An entry is
// used only when every field equals the file's identity now: any write to the file changes its
// ctime (which no user-space call can set back), a replaced file has another inode. An entry is
// written only when the file's ctime is at least kSha256CacheSettleNs older than the start of
// the hash that it records, so a write in the same timestamp tick as an earlier one cannot
// leave a stale entry looking fresh (the "racy clean" case of git's index).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "gguf/gguf.h"

namespace invar {

constexpr int64_t kSha256CacheSettleNs = int64_t(2) * 1000 * 1000 * 1000;

// $XDG_CACHE_HOME/invar/sha256, else $HOME/.cache/invar/sha256; "" when neither is set.
std::string sha256_cache_dir_default();

// The hash recorded in `dir` for exactly this identity; nullopt when there is none or it does
// not match every field (or the entry is malformed).
std::optional<std::string> sha256_cache_find(const std::string& dir, const FileIdentity& id);

// Records hex as the hash of the file with identity id, whose hashing started at
// hash_start_ns (CLOCK_REALTIME, the clock of ctime). Returns "" when stored, else why not
// (too recent a change, or an I/O error): the cache is an optimisation and never fails a start.
std::string sha256_cache_store(const std::string& dir, const FileIdentity& id,
                               const std::string& hex, int64_t hash_start_ns);

// CLOCK_REALTIME in nanoseconds (the clock of file timestamps).
int64_t realtime_ns();

}  // namespace invar
