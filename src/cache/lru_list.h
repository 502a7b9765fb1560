// An intrusive doubly linked list over ids 0..n−1, in least-recently-used order (front = oldest).
// Every operation is O(1) and allocation-free; grow() makes room for more ids.
#pragma once

#include <cstdint>
#include <vector>

#include "core/error.h"

namespace invar {

class LruList {
 public:
  static constexpr int64_t kIdBytes = 2 * sizeof(int32_t);  // memory per id

  explicit LruList(int64_t n = 0) { grow(n); }
  void grow(int64_t n) {  // ids 0..n−1 exist (never shrinks)
    if (n <= static_cast<int64_t>(prev_.size())) return;
    prev_.resize(static_cast<size_t>(n), kOut);
    next_.resize(static_cast<size_t>(n), kOut);
  }

  bool contains(int32_t i) const { return prev_[static_cast<size_t>(i)] != kOut; }
  bool empty() const { return head_ == kNone; }
  int32_t front() const { return head_; }  // -1 when empty
  int64_t size() const { return size_; }

  void push_back(int32_t i) {
    INVAR_CHECK(!contains(i));
    prev_[static_cast<size_t>(i)] = tail_;
    next_[static_cast<size_t>(i)] = kNone;
    if (tail_ == kNone)
      head_ = i;
    else
      next_[static_cast<size_t>(tail_)] = i;
    tail_ = i;
    ++size_;
  }
  void remove(int32_t i) {
    INVAR_CHECK(contains(i));
    const int32_t p = prev_[static_cast<size_t>(i)], n = next_[static_cast<size_t>(i)];
    if (p == kNone)
      head_ = n;
    else
      next_[static_cast<size_t>(p)] = n;
    if (n == kNone)
      tail_ = p;
    else
      prev_[static_cast<size_t>(n)] = p;
    prev_[static_cast<size_t>(i)] = next_[static_cast<size_t>(i)] = kOut;
    --size_;
  }
  void touch(int32_t i) {  // move to the most-recently-used end
    remove(i);
    push_back(i);
  }

 private:
  static constexpr int32_t kNone = -1;  // end of list
  static constexpr int32_t kOut = -2;   // not in the list
  std::vector<int32_t> prev_, next_;
  int32_t head_ = kNone, tail_ = kNone;
  int64_t size_ = 0;
};

}  // namespace invar
