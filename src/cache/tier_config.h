// What the engine's caller sets and reads of the lower cache tiers (lower_tiers.h): the flags
// and the counters /metrics shows. Kept apart so that the layers above see no tier internals.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace invar {

struct TierConfig {
  std::string cache_dir;                // --cache-dir: "" = no disk tier
  int64_t cache_dir_bytes = 8ll << 30;  // --cache-dir-bytes: disk budget of this model
  std::string redis_url;                // --cache-redis: "" = no Redis tier
  std::string key_file;                 // --cache-tier-key: the deployment's secret (tier_secret.h)
  std::string redis_password_file;      // --cache-redis-password-file: AUTH's password
  std::string redis_ca_file;            // --cache-redis-ca: PEM CAs a rediss:// server's
                                        // certificate must chain to ("": the system's)
  double read_timeout_s = 0.25;         // --cache-tier-timeout: engine's wait for reads
  double redis_timeout_s = 0.5;         // connect and per-command timeout of Redis
  int64_t write_queue_bytes = 64ll << 20;  // --cache-tier-queue-bytes: records awaiting write
  int64_t commit_delay_ms = 5;             // --cache-dir-commit-ms: the writer's wait after a
                                           // record for more to file in one group commit (0:
                                           // none; only with a disk tier)
  int64_t commit_records = 32;             // most records in one group commit
  int64_t commit_bytes = 32ll << 20;       // most record bytes in one (at least one record)
  int64_t disk_write_delay_ms = 0;         // tests: a pause inside every file write
  // Where a tier's failures and recoveries are reported, one line each (stderr when empty).
  std::function<void(const std::string&)> log;
  bool enabled() const { return !cache_dir.empty() || !redis_url.empty(); }
};

// /metrics view of one tier.
struct TierReport {
  std::string tier;  // "disk", "redis"
  int64_t hits = 0, misses = 0, writes = 0, write_drops = 0, write_failures = 0, commits = 0,
          corrupt = 0, errors = 0, evictions = 0;
  int64_t bytes = -1;  // bytes stored as far as this process knows (−1: unknown)
};

struct TiersReport {
  std::vector<TierReport> tiers;
  int64_t read_timeouts = 0;  // fetches cut short by the read timeout
  int64_t mismatches = 0;     // whole records for a key whose chain differed (kept, unused)
  int64_t queue_bytes = 0;    // records awaiting write
};

}  // namespace invar
