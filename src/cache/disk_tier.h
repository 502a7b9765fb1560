// The disk tier: one file per record, content-addressed, crash-safe, LRU by bytes on disk.
//
// Layout (docs/cache-tiers.md): DIR/<fingerprint>/<first two hex digits of key>/<key>.blk, and
// DIR/<fingerprint>/tmp/ for writes in progress. A record is written to a uniquely named
// temporary file, made durable, renamed into place and the directory made durable, so a reader
// opens either nothing or a whole file, and a crash leaves at most temporary files, which the
// next start removes. A batch (put_batch) is one group commit: every temporary is written, one
// sync makes them all durable, then all are renamed and one more sync makes the names durable:
// two syncs per batch instead of two per record. Several processes (or hosts, on a shared
// filesystem) may use one directory: two writers of one key write the same bytes and the later
// rename wins harmlessly.
//
// The byte budget is kept over the files this process knows: those found at start, those it
// wrote and those it read. Least recently used files go first; reads refresh a file's mtime so
// the order survives a restart.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cache/tier_store.h"

namespace invar {

struct DiskTierConfig {
  std::string dir;             // --cache-dir
  int64_t budget_bytes = 0;    // --cache-dir-bytes
  std::string fingerprint;     // a subdirectory per model: models never mix
  int64_t write_delay_ms = 0;  // tests: pause in the middle of each file write
};

class DiskTier : public TierStore {
 public:
  // Creates the directories, removes temporary files left by dead writers and indexes the
  // records present; throws Error when the directory cannot be used.
  explicit DiskTier(DiskTierConfig cfg);

  const char* name() const override { return "disk"; }
  TierGet get(uint64_t key, std::vector<char>& out) override;
  TierPut put(uint64_t key, std::span<const char> record) override;  // a batch of one
  void put_batch(std::span<const TierPutItem> items, std::span<TierPut> results) override;
  void remove(uint64_t key) override;
  int64_t bytes_stored() const override;
  std::string describe() const override;

  int64_t files_known() const;
  int64_t stale_temporaries_removed() const { return stale_removed_; }
  int64_t syncs() const { return syncs_; }  // fsync and syncfs calls made by writes

 private:
  std::string path_of(uint64_t key) const;
  // True when the record is already on disk (known, or written by another process).
  bool present_mark(uint64_t key, int64_t bytes);
  void scan();
  void known_add(uint64_t key, int64_t bytes);  // mu_ held
  void budget_keep();                           // mu_ held

  struct Known {
    int64_t bytes = 0;
    std::list<uint64_t>::iterator lru;
  };

  DiskTierConfig cfg_;
  std::string root_;        // DIR/<fingerprint>
  std::string tmp_prefix_;  // unique per process: host.pid
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Known> known_;
  std::list<uint64_t> lru_;  // front: least recently used
  int64_t bytes_ = 0;
  int64_t stale_removed_ = 0;
  std::atomic<int64_t> syncs_{0};
};

}  // namespace invar
