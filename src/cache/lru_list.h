// An intrusive doubly linked list over ids 0..n−1, in least-recently-used order (front = oldest).
// Every operation is O(1) and allocation-free; grow() makes room for more ids, shrink() drops
// the highest ones.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cache/table_capacity.h"
#include "core/error.h"

namespace invar {

class LruList {
 public:
  static constexpr int64_t kIdBytes = 2 * sizeof(int32_t);  // memory per id

  explicit LruList(int64_t n = 0) { grow(n); }
  void grow(int64_t n) {  // ids 0..n−1 exist
    if (n <= static_cast<int64_t>(prev_.size())) return;
    prev_.resize(static_cast<size_t>(n), kOut);
    next_.resize(static_cast<size_t>(n), kOut);
  }
  // Only ids 0..n−1 exist; none of the others may be in the list. Capacity is released once it
  // exceeds twice the size (growth doubles it again: no reallocation at every step).
  void shrink(int64_t n) {
    for (auto i = static_cast<size_t>(n); i < prev_.size(); ++i)
      INVAR_CHECK(prev_[i] == kOut, "shrinking away listed id " + std::to_string(i));
    if (n >= static_cast<int64_t>(prev_.size())) return;
    prev_.resize(static_cast<size_t>(n));
    next_.resize(static_cast<size_t>(n));
    capacity_fit(prev_);
    capacity_fit(next_);
  }
  int64_t bytes_tables() const { return capacity_bytes(prev_) + capacity_bytes(next_); }

  bool contains(int32_t i) const { return prev_[static_cast<size_t>(i)] != kOut; }
  bool empty() const { return head_ == kNone; }
  int32_t front() const { return head_; }  // -1 when empty
  int64_t size() const { return size_; }

  void push_back(int32_t i) {
    INVAR_CHECK(!contains(i));
    prev_[static_cast<size_t>(i)] = tail_;
    next_[static_cast<size_t>(i)] = kNone;
    after_link(tail_, i);
    tail_ = i;
    ++size_;
  }
  void remove(int32_t i) {
    INVAR_CHECK(contains(i));
    const int32_t p = prev_[static_cast<size_t>(i)], n = next_[static_cast<size_t>(i)];
    after_link(p, n);
    before_link(n, p);
    prev_[static_cast<size_t>(i)] = next_[static_cast<size_t>(i)] = kOut;
    --size_;
  }
  // Aborts unless the links walk head to tail through exactly the listed ids (tests).
  void check_invariants() const {
    int64_t n = 0;
    for (int32_t i = head_, p = kNone; i != kNone; p = i, i = next_[static_cast<size_t>(i)]) {
      INVAR_CHECK(i >= 0 && static_cast<size_t>(i) < prev_.size() && n < size_ &&
                      prev_[static_cast<size_t>(i)] == p,
                  "LRU links broken at " + std::to_string(i));
      ++n;
      if (next_[static_cast<size_t>(i)] == kNone) INVAR_CHECK(tail_ == i);
    }
    int64_t listed = 0;
    for (int32_t p : prev_) listed += p != kOut;
    INVAR_CHECK(n == size_ && listed == size_ && (size_ > 0 || tail_ == kNone),
                "LRU size " + std::to_string(size_));
  }
  void touch(int32_t i) {  // move to the most-recently-used end
    remove(i);
    push_back(i);
  }
  // Id `to` (not listed) takes listed id `from`'s place in the order; `from` leaves the list.
  void rename(int32_t from, int32_t to) {
    INVAR_CHECK(contains(from) && !contains(to));
    const int32_t p = prev_[static_cast<size_t>(from)], n = next_[static_cast<size_t>(from)];
    prev_[static_cast<size_t>(to)] = p;
    next_[static_cast<size_t>(to)] = n;
    after_link(p, to);
    before_link(n, to);
    prev_[static_cast<size_t>(from)] = next_[static_cast<size_t>(from)] = kOut;
  }

 private:
  static constexpr int32_t kNone = -1;     // end of list
  static constexpr int32_t kOut = -2;      // not in the list
  void after_link(int32_t p, int32_t i) {  // i follows p (p = kNone: i is the head)
    if (p == kNone)
      head_ = i;
    else
      next_[static_cast<size_t>(p)] = i;
  }
  void before_link(int32_t n, int32_t i) {  // i precedes n (n = kNone: i is the tail)
    if (n == kNone)
      tail_ = i;
    else
      prev_[static_cast<size_t>(n)] = i;
  }
  std::vector<int32_t> prev_, next_;
  int32_t head_ = kNone, tail_ = kNone;
  int64_t size_ = 0;
};

}  // namespace invar
