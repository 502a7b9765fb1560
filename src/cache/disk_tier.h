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
// the order survives a restart. A full filesystem (ENOSPC, EDQUOT) also evicts: the least
// recently used records make room and the write is tried once more.
//
// Whoever can write the directory can plant anything at a record's name. A read opens without
// following a link and without blocking (a FIFO), and reads only a regular file whose size a
// record of the shape can have: anything else costs one open and fstat, and get() returns it as
// an empty record, which the reader counts corrupt and removes like any damaged record.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cache/tier_record.h"
#include "cache/tier_store.h"

namespace invar {

struct DiskTierConfig {
  std::string dir;             // --cache-dir
  int64_t budget_bytes = 0;    // --cache-dir-bytes
  std::string fingerprint;     // a subdirectory per model: models never mix
  int64_t write_delay_ms = 0;  // tests: pause in the middle of each file write
};

// What a file at a record's name may be, and the space the tier may take.
struct DiskTierLimits {
  // The records' shape: a file whose size no record of it can have is never read (block_size
  // 0: any size is read, for tools that do not know the shape).
  TierShape shape;
  // Tests: a write that would take the tier's files past this many bytes fails with ENOSPC, as
  // a full filesystem would (0: the filesystem decides).
  int64_t space_bytes = 0;
};

class DiskTier : public TierStore {
 public:
  // Creates the directories, removes temporary files left by dead writers and indexes the
  // records present; throws Error when the directory cannot be used.
  explicit DiskTier(DiskTierConfig cfg, DiskTierLimits limits = {});

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
  // Writes that met a full filesystem and evicted records to make room.
  int64_t space_evictions() const { return space_evictions_; }

 private:
  std::string path_of(uint64_t key) const;
  // True when the record is already on disk (known, or written by another process).
  bool present_mark(uint64_t key, int64_t bytes);
  void scan();
  void known_add(uint64_t key, int64_t bytes);  // mu_ held
  void budget_keep();                           // mu_ held
  // Whether a file of this size and type can be a record of cfg_.shape.
  bool file_plausible(const struct stat& st) const;
  // A write failed for want of space: evicts the least recently used records, at least `need`
  // bytes and an eighth of what is known. False when there was nothing to evict.
  bool space_make(int64_t need);
  // Writes the record to a new temporary file (its name into tmp): the open fd, or -1 with errno
  // set (ENOSPC for a short write) and the file removed.
  int temporary_write(uint64_t key, std::span<const char> record, std::string& tmp);

  struct Known {
    int64_t bytes = 0;
    std::list<uint64_t>::iterator lru;
  };

  DiskTierConfig cfg_;
  DiskTierLimits lim_;
  std::string root_;        // DIR/<fingerprint>
  std::string tmp_prefix_;  // unique per process: host.pid
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Known> known_;
  std::list<uint64_t> lru_;  // front: least recently used
  int64_t bytes_ = 0;
  int64_t stale_removed_ = 0;
  std::atomic<int64_t> syncs_{0};
  std::atomic<int64_t> space_evictions_{0};
};

}  // namespace invar
