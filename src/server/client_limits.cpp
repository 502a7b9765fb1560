#include "server/client_limits.h"

#include <algorithm>

#include "core/error.h"

namespace invar::server {

bool ClientSlots::acquire(const std::string& client, int64_t cap) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t& n = held_[client];
  if (n >= cap) {
    if (n == 0) held_.erase(client);
    return false;
  }
  ++n;
  return true;
}

void ClientSlots::release(const std::string& client) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = held_.find(client);
  INVAR_CHECK(it != held_.end() && it->second > 0, "a client slot released twice");
  if (--it->second == 0) held_.erase(it);
}

int64_t ClientSlots::held(const std::string& client) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = held_.find(client);
  return it == held_.end() ? 0 : it->second;
}

int64_t client_cap(int64_t asked, int64_t limit) {
  if (asked > 0) return asked;
  return std::max<int64_t>(1, limit - limit / 4);
}

}  // namespace invar::server
