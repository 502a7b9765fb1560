// The finished responses of POST /v1/responses that asked to be stored (`store`, default true):
// what GET /v1/responses/{id} returns and what `previous_response_id` continues.
//
// Bounded by bytes (--response-store-bytes; 0 keeps none): each entry costs its response's and
// its conversation's JSON text; beyond the budget the least recently used go first, and an entry
// larger than the whole budget is not kept. In memory only: a restart forgets every response.
// Per tenant: an entry is found only by the tenant (tenants.h) that stored it; for another it
// does not exist. Thread-safe (one mutex; a lookup copies a shared pointer).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>

namespace invar::server {

struct StoredResponse {
  nlohmann::ordered_json response;      // the response object, as GET returns it
  nlohmann::ordered_json conversation;  // input and output items, the whole chain: a follow-up's
                                        // history (instructions are not carried over)
  int64_t bytes = 0;
};

class ResponseStore {
 public:
  explicit ResponseStore(int64_t budget_bytes) : budget_(budget_bytes) {}

  bool enabled() const { return budget_ > 0; }
  int64_t budget() const { return budget_; }

  // Keeps (or replaces) `id` for `tenant`, then drops the least recently used beyond the
  // budget. False when not kept (the store is off, or the entry alone exceeds the budget).
  bool put(const std::string& tenant, const std::string& id, nlohmann::ordered_json response,
           nlohmann::ordered_json conversation);
  // The entry, now the most recently used; null when absent (or another tenant's).
  std::shared_ptr<const StoredResponse> get(const std::string& tenant, const std::string& id);
  // False when absent.
  bool erase(const std::string& tenant, const std::string& id);

  int64_t bytes() const;
  size_t size() const;

 private:
  using Lru = std::list<std::string>;  // keys, most recent first
  struct Slot {
    std::shared_ptr<const StoredResponse> value;
    Lru::iterator pos;
  };
  static std::string key(const std::string& tenant, const std::string& id) {
    return tenant + '\n' + id;
  }

  const int64_t budget_;
  mutable std::mutex mu_;
  Lru lru_;
  std::unordered_map<std::string, Slot> map_;
  int64_t bytes_ = 0;
};

}  // namespace invar::server
