#include "server/response_store.h"

namespace invar::server {

bool ResponseStore::put(const std::string& tenant, const std::string& id,
                        nlohmann::ordered_json response, nlohmann::ordered_json conversation) {
  if (budget_ <= 0) return false;
  auto v = std::make_shared<StoredResponse>();
  v->response = std::move(response);
  v->conversation = std::move(conversation);
  v->bytes =
      int64_t(v->response.dump().size() + v->conversation.dump().size() + key(tenant, id).size());
  std::lock_guard<std::mutex> lock(mu_);
  const std::string k = key(tenant, id);
  if (auto it = map_.find(k); it != map_.end()) {
    bytes_ -= it->second.value->bytes;
    lru_.erase(it->second.pos);
    map_.erase(it);
  }
  if (v->bytes > budget_) return false;
  lru_.push_front(k);
  bytes_ += v->bytes;
  map_[k] = {std::move(v), lru_.begin()};
  while (bytes_ > budget_) {
    auto last = map_.find(lru_.back());
    bytes_ -= last->second.value->bytes;
    map_.erase(last);
    lru_.pop_back();
  }
  return true;
}

std::shared_ptr<const StoredResponse> ResponseStore::get(const std::string& tenant,
                                                         const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key(tenant, id));
  if (it == map_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.pos);
  return it->second.value;
}

bool ResponseStore::erase(const std::string& tenant, const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key(tenant, id));
  if (it == map_.end()) return false;
  bytes_ -= it->second.value->bytes;
  lru_.erase(it->second.pos);
  map_.erase(it);
  return true;
}

int64_t ResponseStore::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

size_t ResponseStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_.size();
}

}  // namespace invar::server
