// Tower outputs kept across requests: Q questions about one scanned invoice encode it once.
// Keyed by what the output is a pure function of, for one mmproj file: the pixels' SHA-256 (of
// the resized, normalised pixels) and the resized size; least recently used entries go first
// once their rows pass the byte budget. Thread-safe; entries are shared, never copied in.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace invar {

class EncodeCache {
 public:
  using Rows = std::shared_ptr<const std::vector<float>>;
  explicit EncodeCache(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // The rows stored under key, made most recent; null when absent.
  Rows find(const std::string& key);
  // Stores rows under key (replacing any), then drops the least recent entries until the rows
  // held fit the budget; an entry larger than the whole budget is not kept.
  void put(const std::string& key, Rows rows);
  int64_t bytes() const;  // bytes of rows held
  int64_t max_bytes() const { return max_bytes_; }

 private:
  struct Entry {
    std::string key;
    Rows rows;
  };
  static int64_t bytes_of(const Rows& r) { return int64_t(r->size() * sizeof(float)); }

  const int64_t max_bytes_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  int64_t bytes_ = 0;
};

}  // namespace invar
