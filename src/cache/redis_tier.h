// The Redis tier: records as Redis strings under "invar:<fingerprint>:<key hex>", shared by every
// replica that points at the same server. Same records, checksums and checks as the disk tier;
// the byte budget is Redis's own (maxmemory with an LRU or LFU eviction policy, which the
// start-up line reports). Every command is bounded by a timeout; a failed connection is retried
// at most once a second, and until then reads miss and writes fail — the engine recomputes.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "cache/tier_store.h"

struct redisContext;  // hiredis

namespace invar {

struct RedisUrl {
  std::string host;
  int port = 6379;
  int db = 0;
};
// redis://host[:port][/db]; throws Error naming what is wrong.
RedisUrl redis_url_parse(const std::string& url);

struct RedisTierConfig {
  std::string url;          // --cache-redis
  std::string fingerprint;  // part of every key: models never mix
  double timeout_s = 0.5;   // connect and per-command timeout
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
  // One connection per calling thread role: hiredis contexts are not thread-safe, and a large
  // write must not hold up a read.
  struct Connection {
    std::mutex mu;
    redisContext* ctx = nullptr;
    std::chrono::steady_clock::time_point retry_at{};
    std::string error;  // why the connection last failed (connect or command), for the log
  };
  bool connected(Connection& c);  // c.mu held
  void drop(Connection& c);       // c.mu held
  std::string key_of(uint64_t key) const;

  RedisTierConfig cfg_;
  RedisUrl url_;
  std::string prefix_;  // "invar:<fingerprint>:"
  Connection reader_, writer_;
  std::string policy_;  // maxmemory-policy and maxmemory at start, for the log
};

}  // namespace invar
