// Per-client caps at the server's edge, below the server-wide ones: one client may hold at most
// a set number of requests in flight (--client-queue-limit) and of open connections
// (--client-max-connections), so a client that floods the server gets 429s while the slots left
// serve everyone else. Who a client is: http_server.cpp's client_key (the API key's digest when
// keys are set, which a tenant id may replace, else the peer's address); connections are counted
// by peer address, the only identity known when one is accepted.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace invar::server {

// What each client holds of one kind of slot. A client holding nothing has no entry, so the
// table is never larger than what is held.
class ClientSlots {
 public:
  // Takes a slot for `client` unless it already holds `cap`; false then (and nothing taken).
  bool acquire(const std::string& client, int64_t cap);
  void release(const std::string& client);  // one slot acquire() gave
  int64_t held(const std::string& client) const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, int64_t> held_;
};

// A per-client cap derived from the server-wide `limit` (0 asked: derived): three quarters of
// it, so one client alone leaves a quarter to the others. A cap at or above `limit` never binds.
int64_t client_cap(int64_t asked, int64_t limit);

}  // namespace invar::server
