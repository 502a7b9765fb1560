// The cache tiers below memory (disk, then Redis) behind one interface for the engine, with all
// their I/O on two threads of their own: the engine thread never waits for a write and waits
// for a read at most the read timeout.
//
// Writes: block_offer() copies the block into a buffer of a bounded queue and returns (the
// writer thread seals it: tier_record.h); when the queue is full the record is dropped
// (counted), never waited for. The writer thread files
// the records in every tier in batches, one group commit each (TierStore::put_batch): what is
// queued, up to commit_records and commit_bytes, waiting at most commit_delay_ms after the first
// record was queued for more to come. On destruction the queue is written out (SIGTERM keeps
// the work done); a killed process loses only the queue and the temporary files of one batch.
// Reads: prefix_fetch() hands the reader thread the keys of consecutive blocks; for each block
// the reader tries the tiers in order under the block's name (tier_record_name) and opens the
// record (seal, fingerprint, shape, key, parent key, tokens). It stops at the first block no tier
// holds. A record found in a lower tier only is copied into the tiers above it, sealed as it was.
// Records that fail their checks are removed and counted (the first one logged), never returned. At
// the timeout the engine takes what has arrived and the reader stops. Failures reach the log once
// per episode, never once per request (a tier that is down fails every lookup): the first failed
// read (or write) of a tier that worked, with the reason, and the first success after it, with how
// many failed in between; the first corrupt record of each tier (more are only counted).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "cache/tier_config.h"
#include "cache/tier_record.h"
#include "cache/tier_store.h"

namespace invar {

// A block read back from a tier: the record opened (decrypted) and views into it.
struct FetchedBlock {
  std::vector<char> record;
  TierBlock block;
};

class LowerTiers {
 public:
  // Opens the tiers (throws Error for a bad directory or URL) and starts the threads.
  // secret: tier_secret_resolve(cfg), the same one the prefix cache keys its chains with.
  LowerTiers(const TierConfig& cfg, TierShape shape, TierSecret secret);
  ~LowerTiers();  // writes out the queue, stops the threads
  LowerTiers(const LowerTiers&) = delete;
  LowerTiers& operator=(const LowerTiers&) = delete;

  const TierShape& shape() const { return shape_; }
  // Engine thread: queue the block for every tier; drops it when the queue is full.
  void block_offer(const TierBlock& block);
  // Engine thread: records of consecutive blocks, keys[i] chained from parents[i], block i
  // holding tokens[i·bs, (i+1)·bs); stops at the first block no tier holds and after the read
  // timeout. The result is a prefix of the blocks asked for.
  std::vector<FetchedBlock> prefix_fetch(std::span<const uint64_t> keys,
                                         std::span<const uint64_t> parents,
                                         std::span<const int32_t> tokens);
  TiersReport report() const;
  std::string describe() const;  // the start-up log line
  // Tests: until the queue is empty and no write is running; the writer stops waiting for more.
  void writes_wait();

 private:
  struct WriteJob {
    uint64_t key = 0;  // the record's name (tier_record_name)
    std::vector<char> record;
    size_t first_tier = 0, end_tier = 0;  // tiers [first, end) get it
    bool sealed = true;                   // false: the writer computes the checksum
    std::chrono::steady_clock::time_point queued;
  };
  struct FetchJob {
    std::vector<uint64_t> keys, parents;
    std::vector<int32_t> tokens;
    std::vector<FetchedBlock> got;  // guarded by LowerTiers::fetch_mu_
    bool done = false, abandoned = false;
  };

  bool write_enqueue(uint64_t key, std::vector<char>&& record, size_t first, size_t end,
                     bool sealed);
  void writer_loop();
  size_t batch_count() const;  // write_mu_ held: the queued jobs the next commit takes
  void batch_write(std::vector<WriteJob>& batch);
  void reader_loop();
  void fetch_run(FetchJob& job);
  // The outcome of one read (write = false, reader thread) or write (writer thread) of tier t:
  // logs the change from working to failing and back.
  void health_note(size_t t, bool write, bool failed);
  void log_line(const std::string& line) const;

  TierConfig cfg_;
  TierShape shape_;
  TierSecret secret_;
  std::vector<std::unique_ptr<TierStore>> stores_;  // read order: disk, then Redis
  // Per tier and direction: failures since the last success (0: working). [tier][write]; the
  // reader thread owns [t][0], the writer thread [t][1].
  std::vector<std::array<int64_t, 2>> failing_;
  std::vector<bool> corrupt_logged_;  // [tier]: the reader thread has logged a corrupt record

  mutable std::mutex write_mu_;
  std::condition_variable write_cv_;
  std::deque<WriteJob> writes_;
  std::vector<std::vector<char>> spare_;  // buffers of written records, reused
  int64_t queued_bytes_ = 0;
  std::chrono::milliseconds commit_delay_{0};
  int flush_waiters_ = 0;  // threads in writes_wait
  bool writing_ = false, stop_ = false;

  std::mutex fetch_mu_;
  std::condition_variable fetch_cv_;
  std::deque<std::shared_ptr<FetchJob>> fetches_;
  bool reader_stop_ = false;

  std::atomic<int64_t> read_timeouts_{0}, mismatches_{0};
  std::thread writer_, reader_;
};

}  // namespace invar
