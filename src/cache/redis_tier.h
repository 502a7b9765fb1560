// The Redis tier: records as Redis strings under "invar:<fingerprint>:<name hex>", shared by every
// replica that points at the same server (and holds the same --cache-tier-key). Same sealed
// records and checks as the disk tier; AUTH (a password, or an ACL user and password) and TLS
// (rediss://, the server's certificate checked) as the URL says. A value longer than any record
// is never read whole (GETRANGE), and is removed as corrupt;
// the byte budget is Redis's own (maxmemory with an LRU or LFU eviction policy, which the
// start-up line reports). Every command is bounded by a timeout; a failed connection is retried
// at most once a second, and until then reads miss and writes fail — the engine recomputes.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "cache/redis_connection.h"
#include "cache/tier_store.h"

namespace invar {

struct RedisTierConfig {
  std::string url;              // --cache-redis
  std::string password_file;    // --cache-redis-password-file: AUTH's password (first line)
  std::string ca_file;          // --cache-redis-ca: CAs of a rediss:// server ("": the system's)
  std::string fingerprint;      // part of every key: models never mix
  double timeout_s = 0.5;       // connect and per-command timeout
  int64_t value_bytes_max = 0;  // the largest record (tier_record_bytes_max); 0: no cap
};

class RedisTier : public TierStore {
 public:
  // Parses the URL (throws Error) and tries to connect; an unreachable server is not an error.
  explicit RedisTier(RedisTierConfig cfg);
  ~RedisTier() override;

  const char* name() const override { return "redis"; }
  TierGet get(uint64_t key, std::vector<char>& out) override;
  TierPut put(uint64_t key, std::span<const char> record) override;
  void remove(uint64_t key) override;
  int64_t bytes_stored() const override { return -1; }
  std::string describe() const override;

 private:
  // One connection per calling thread role: a connection carries one command at a time, and a
  // large write must not hold up a read.
  struct Connection {
    std::mutex mu;
    RedisConnection conn;
    std::chrono::steady_clock::time_point retry_at{};
    std::string error;  // why the connection last failed (connect or command), for the log
  };
  bool connected(Connection& c);  // c.mu held
  void drop(Connection& c);       // c.mu held
  std::string key_of(uint64_t key) const;

  RedisTierConfig cfg_;
  RedisUrl url_;
  std::unique_ptr<RedisTls> tls_;  // rediss:// only
  std::string prefix_;             // "invar:<fingerprint>:"
  Connection reader_, writer_;
  std::string policy_;  // maxmemory-policy and maxmemory at start, for the log
};

}  // namespace invar
