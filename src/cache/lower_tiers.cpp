#include "cache/lower_tiers.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "cache/disk_tier.h"
#include "cache/redis_tier.h"
#include "core/error.h"

namespace invar {

namespace {

constexpr size_t kSpareBuffers = 8;  // written records' buffers kept for the next ones

}  // namespace

LowerTiers::LowerTiers(const TierConfig& cfg, TierShape shape, TierSecret secret)
    : cfg_(cfg), shape_(std::move(shape)), secret_(std::move(secret)) {
  if (!(cfg_.read_timeout_s > 0)) throw Error("--cache-tier-timeout must be > 0");
  if (cfg_.write_queue_bytes < 0) throw Error("--cache-tier-queue-bytes must be ≥ 0");
  if (cfg_.commit_delay_ms < 0) throw Error("--cache-dir-commit-ms must be ≥ 0");
  if (cfg_.commit_records < 1 || cfg_.commit_bytes < 0)
    throw Error("a group commit needs room for at least one record");
  if (shape_.fingerprint.size() > 64) throw Error("fingerprint longer than 64 bytes");
  if (!cfg_.cache_dir.empty()) {
    DiskTierConfig d;
    d.dir = cfg_.cache_dir;
    d.budget_bytes = cfg_.cache_dir_bytes;
    d.fingerprint = shape_.fingerprint;
    d.write_delay_ms = cfg_.disk_write_delay_ms;
    DiskTierLimits limits;
    limits.shape = shape_;
    stores_.push_back(std::make_unique<DiskTier>(d, limits));
    commit_delay_ = std::chrono::milliseconds(cfg_.commit_delay_ms);  // Redis gains nothing
  }
  if (!cfg_.redis_url.empty()) {
    RedisTierConfig r;
    r.url = cfg_.redis_url;
    r.fingerprint = shape_.fingerprint;
    r.timeout_s = cfg_.redis_timeout_s;
    r.password_file = cfg_.redis_password_file;
    r.ca_file = cfg_.redis_ca_file;
    r.value_bytes_max = tier_record_bytes_max(shape_);
    stores_.push_back(std::make_unique<RedisTier>(r));
  }
  failing_.assign(stores_.size(), {0, 0});
  corrupt_logged_.assign(stores_.size(), false);
  writer_ = std::thread([this] { writer_loop(); });
  reader_ = std::thread([this] { reader_loop(); });
}

LowerTiers::~LowerTiers() {
  {
    std::lock_guard<std::mutex> lock(fetch_mu_);
    reader_stop_ = true;
  }
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    stop_ = true;
  }
  write_cv_.notify_all();
  fetch_cv_.notify_all();
  reader_.join();
  writer_.join();  // after it has written out the queue
}

bool LowerTiers::write_enqueue(uint64_t key, std::vector<char>&& record, size_t first, size_t end,
                               bool sealed) {
  std::lock_guard<std::mutex> lock(write_mu_);
  if (queued_bytes_ + static_cast<int64_t>(record.size()) > cfg_.write_queue_bytes || stop_) {
    for (size_t t = first; t < end; ++t) ++stores_[t]->counters.write_drops;
    return false;
  }
  queued_bytes_ += static_cast<int64_t>(record.size());
  writes_.push_back(
      WriteJob{key, std::move(record), first, end, sealed, std::chrono::steady_clock::now()});
  write_cv_.notify_all();  // the writer, not only a thread in writes_wait
  return true;
}

void LowerTiers::block_offer(const TierBlock& block) {
  if (stores_.empty()) return;
  const int64_t bytes = tier_record_bytes(shape_, block.checkpoint, !block.hidden.empty());
  std::vector<char> buf;
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    if (queued_bytes_ + bytes > cfg_.write_queue_bytes) {
      for (auto& s : stores_) ++s->counters.write_drops;
      return;
    }
    if (!spare_.empty()) {
      buf = std::move(spare_.back());
      spare_.pop_back();
    }
  }
  tier_record_encode(shape_, block, buf);
  write_enqueue(tier_record_name(secret_, block.key), std::move(buf), 0, stores_.size(),
                /*sealed=*/false);
}

size_t LowerTiers::batch_count() const {
  size_t n = 0;
  int64_t bytes = 0;
  for (const WriteJob& job : writes_) {
    bytes += static_cast<int64_t>(job.record.size());
    if (n == static_cast<size_t>(cfg_.commit_records) || (n > 0 && bytes > cfg_.commit_bytes))
      break;
    ++n;
  }
  return n;
}

void LowerTiers::writer_loop() {
  std::vector<WriteJob> batch;
  std::unique_lock<std::mutex> lock(write_mu_);
  for (;;) {
    write_cv_.wait(lock, [&] { return stop_ || !writes_.empty(); });
    if (writes_.empty()) return;  // stopping, and everything is written
    // More records may come: one sync will serve them all. A full batch, a stop or writes_wait
    // ends the wait early.
    write_cv_.wait_until(lock, writes_.front().queued + commit_delay_, [&] {
      return stop_ || flush_waiters_ > 0 || batch_count() < writes_.size() ||
             batch_count() == static_cast<size_t>(cfg_.commit_records);
    });
    for (size_t n = batch_count(); n > 0; --n) {
      batch.push_back(std::move(writes_.front()));
      writes_.pop_front();
    }
    writing_ = true;
    lock.unlock();
    batch_write(batch);
    lock.lock();
    for (WriteJob& job : batch) {
      queued_bytes_ -= static_cast<int64_t>(job.record.size());
      if (spare_.size() < kSpareBuffers) spare_.push_back(std::move(job.record));
    }
    batch.clear();
    writing_ = false;
    write_cv_.notify_all();
  }
}

void LowerTiers::batch_write(std::vector<WriteJob>& batch) {
  for (WriteJob& job : batch)
    if (!job.sealed) tier_record_seal(secret_, job.key, job.record);
  std::vector<TierPutItem> items;
  std::vector<TierPut> results;
  for (size_t t = 0; t < stores_.size(); ++t) {
    items.clear();
    for (const WriteJob& job : batch)
      if (job.first_tier <= t && t < job.end_tier) items.push_back({job.key, job.record});
    if (items.empty()) continue;
    results.assign(items.size(), TierPut::failed);
    TierStore& s = *stores_[t];
    s.put_batch(items, results);
    const auto written = std::count(results.begin(), results.end(), TierPut::written);
    s.counters.writes += written;
    s.counters.write_failures += std::count(results.begin(), results.end(), TierPut::failed);
    if (written > 0) ++s.counters.commits;
    for (const TierPut r : results) health_note(t, /*write=*/true, r == TierPut::failed);
  }
}

void LowerTiers::writes_wait() {
  std::unique_lock<std::mutex> lock(write_mu_);
  ++flush_waiters_;
  write_cv_.notify_all();
  write_cv_.wait(lock, [&] { return writes_.empty() && !writing_; });
  --flush_waiters_;
}

std::vector<FetchedBlock> LowerTiers::prefix_fetch(std::span<const uint64_t> keys,
                                                   std::span<const uint64_t> parents,
                                                   std::span<const int32_t> tokens) {
  INVAR_CHECK(keys.size() == parents.size() &&
              static_cast<int64_t>(tokens.size()) ==
                  static_cast<int64_t>(keys.size()) * shape_.block_size);
  if (stores_.empty() || keys.empty()) return {};
  auto job = std::make_shared<FetchJob>();
  job->keys.assign(keys.begin(), keys.end());
  job->parents.assign(parents.begin(), parents.end());
  job->tokens.assign(tokens.begin(), tokens.end());
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(cfg_.read_timeout_s);
  std::unique_lock<std::mutex> lock(fetch_mu_);
  fetches_.push_back(job);
  fetch_cv_.notify_all();
  if (!fetch_cv_.wait_until(lock, deadline, [&] { return job->done; })) {
    job->abandoned = true;
    ++read_timeouts_;
  }
  return std::move(job->got);
}

void LowerTiers::reader_loop() {
  std::unique_lock<std::mutex> lock(fetch_mu_);
  for (;;) {
    fetch_cv_.wait(lock, [&] { return reader_stop_ || !fetches_.empty(); });
    if (reader_stop_) return;
    std::shared_ptr<FetchJob> job = fetches_.front();
    fetches_.pop_front();
    lock.unlock();
    fetch_run(*job);
    lock.lock();
    job->done = true;
    fetch_cv_.notify_all();
  }
}

void LowerTiers::fetch_run(FetchJob& job) {
  const auto bs = static_cast<size_t>(shape_.block_size);
  std::vector<char> sealed;  // a record as read; got.record holds it opened
  for (size_t i = 0; i < job.keys.size(); ++i) {
    {
      std::lock_guard<std::mutex> lock(fetch_mu_);
      if (job.abandoned || reader_stop_) return;
    }
    const std::span<const int32_t> tokens(job.tokens.data() + i * bs, bs);
    const uint64_t name = tier_record_name(secret_, job.keys[i]);
    FetchedBlock got;
    size_t found_in = stores_.size();
    for (size_t t = 0; t < stores_.size() && found_in == stores_.size(); ++t) {
      TierStore& s = *stores_[t];
      const TierGet r = s.get(name, sealed);
      if (r == TierGet::failed) ++s.counters.errors;
      health_note(t, /*write=*/false, r == TierGet::failed);
      if (r != TierGet::found) {
        ++s.counters.misses;
        continue;
      }
      switch (tier_record_open(secret_, shape_, sealed, name, job.keys[i], job.parents[i], tokens,
                               got.record, got.block)) {
        case RecordCheck::ok:
          ++s.counters.hits;
          found_in = t;
          break;
        case RecordCheck::corrupt:
          // Never used, and removed: a forged or planted record denies nothing for long. Logged
          // once per tier; the counter says how many followed.
          ++s.counters.corrupt;
          s.remove(name);
          if (!corrupt_logged_[t]) {
            corrupt_logged_[t] = true;
            log_line(std::string("cache tier ") + s.name() + ": record " + tier_key_hex(name) +
                     " is truncated, corrupt, foreign or not sealed with this deployment's key: "
                     "removed, the block is recomputed (further ones are counted in "
                     "invar_cache_tier_corrupt_total, not logged)");
          }
          break;
        case RecordCheck::mismatch:
          ++mismatches_;
          ++s.counters.misses;
          break;
      }
    }
    if (found_in == stores_.size()) return;
    if (found_in > 0) write_enqueue(name, std::vector<char>(sealed), 0, found_in, true);
    std::lock_guard<std::mutex> lock(fetch_mu_);
    if (job.abandoned) return;
    job.got.push_back(std::move(got));
  }
}

void LowerTiers::health_note(size_t t, bool write, bool failed) {
  int64_t& failing = failing_[t][write ? 1 : 0];
  const std::string what = std::string("cache tier ") + stores_[t]->name() + ": ";
  const char* op = write ? "write" : "read";
  if (failed && failing++ == 0)
    log_line(what + "a " + op + " failed (" + stores_[t]->failure_why(write) +
             "); requests are computed, and further failures counted (invar_cache_tier_" +
             (write ? "write_failures" : "errors") + "_total), not logged, until one succeeds");
  if (!failed && failing > 0) {
    log_line(what + op + "s succeed again after " + std::to_string(failing) + " failed");
    failing = 0;
  }
}

void LowerTiers::log_line(const std::string& line) const {
  if (cfg_.log) {
    cfg_.log(line);
    return;
  }
  std::fprintf(stderr, "invar: %s\n", line.c_str());
}

TiersReport LowerTiers::report() const {
  TiersReport r;
  for (const auto& s : stores_) {
    TierReport t;
    t.tier = s->name();
    t.hits = s->counters.hits;
    t.misses = s->counters.misses;
    t.writes = s->counters.writes;
    t.write_drops = s->counters.write_drops;
    t.write_failures = s->counters.write_failures;
    t.commits = s->counters.commits;
    t.corrupt = s->counters.corrupt;
    t.errors = s->counters.errors;
    t.evictions = s->counters.evictions;
    t.bytes = s->bytes_stored();
    r.tiers.push_back(t);
  }
  r.read_timeouts = read_timeouts_;
  r.mismatches = mismatches_;
  std::lock_guard<std::mutex> lock(write_mu_);
  r.queue_bytes = queued_bytes_;
  return r;
}

std::string LowerTiers::describe() const {
  std::string out =
      "cache tiers (records sealed with key " + secret_.id + " from " + secret_.origin + "):";
  for (const auto& s : stores_) out += " " + s->describe() + ";";
  char buf[160];
  std::snprintf(buf, sizeof buf,
                " read timeout %.3f s, write queue %lld bytes, group commits of <= %lld records "
                "after <= %lld ms",
                cfg_.read_timeout_s, static_cast<long long>(cfg_.write_queue_bytes),
                static_cast<long long>(cfg_.commit_records),
                static_cast<long long>(commit_delay_.count()));
  return out + buf;
}

}  // namespace invar
