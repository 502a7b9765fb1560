// A lower cache tier as the tier manager sees it: records filed by chain key under one model's
// fingerprint. Implementations (disk_tier.h, redis_tier.h) are called from the tier manager's
// reader and writer threads, never from the engine thread, and must be safe to call from both
// at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace invar {

enum class TierGet { found, missing, failed };
enum class TierPut { written, present, failed };

// What a tier has done since start; read by /metrics.
struct TierCounters {
  std::atomic<int64_t> hits{0};            // blocks read back and used
  std::atomic<int64_t> misses{0};          // lookups that found no record
  std::atomic<int64_t> writes{0};          // records stored
  std::atomic<int64_t> write_drops{0};     // records not stored: the write queue was full
  std::atomic<int64_t> write_failures{0};  // records not stored: an I/O or connection error
  std::atomic<int64_t> commits{0};         // batches that stored ≥ 1 record: writes / commits
                                           // = records per group commit
  std::atomic<int64_t> corrupt{0};         // truncated, corrupt, foreign or forged records
                                           // removed
  std::atomic<int64_t> errors{0};          // reads that failed (I/O, connection, timeout)
  std::atomic<int64_t> evictions{0};       // records removed to stay within the byte budget
};

// One record of a batch put.
struct TierPutItem {
  uint64_t key = 0;
  std::span<const char> record;
};

class TierStore {
 public:
  virtual ~TierStore() = default;
  virtual const char* name() const = 0;  // "disk", "redis": the /metrics label
  // The record filed under key, into out (resized).
  virtual TierGet get(uint64_t key, std::vector<char>& out) = 0;
  // Files a record under key; a record already there stays (same key, same bytes).
  virtual TierPut put(uint64_t key, std::span<const char> record) = 0;
  // Files every item as put would, results[i] for items[i]; a tier that can make many records
  // durable at once (disk: one group commit) overrides it.
  virtual void put_batch(std::span<const TierPutItem> items, std::span<TierPut> results) {
    for (size_t i = 0; i < items.size(); ++i) results[i] = put(items[i].key, items[i].record);
  }
  // Drops the record under key (it failed its checks).
  virtual void remove(uint64_t key) = 0;
  virtual int64_t bytes_stored() const = 0;  // as far as this process knows; −1: unknown
  virtual std::string describe() const = 0;  // one phrase for the start-up log
  TierCounters counters;

  // Why the last failed get() (read) or put() (write) failed, for the log: errno's text, the
  // connection's error; "" when the tier did not say.
  std::string failure_why(bool write) const {
    std::lock_guard<std::mutex> lock(why_mu_);
    return write ? write_why_ : read_why_;
  }

 protected:
  void failure_note(bool write, std::string why) {
    std::lock_guard<std::mutex> lock(why_mu_);
    (write ? write_why_ : read_why_) = std::move(why);
  }

 private:
  mutable std::mutex why_mu_;
  std::string read_why_, write_why_;
};

}  // namespace invar
