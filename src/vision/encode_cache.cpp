#include "vision/encode_cache.h"

namespace invar {

EncodeCache::Rows EncodeCache::find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->rows;
}

void EncodeCache::put(const std::string& key, Rows rows) {
  if (!rows || bytes_of(rows) > max_bytes_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) {
    bytes_ -= bytes_of(it->second->rows);
    lru_.erase(it->second);
    index_.erase(it);
  }
  bytes_ += bytes_of(rows);
  lru_.push_front({key, std::move(rows)});
  index_[key] = lru_.begin();
  while (bytes_ > max_bytes_) {
    bytes_ -= bytes_of(lru_.back().rows);
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }
}

int64_t EncodeCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace invar
