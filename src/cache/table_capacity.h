// The cache's per-id tables shrink with their use (prefix_cache.h): what they hold allocated,
// and when a shrunk table gives its spare capacity back.
#pragma once

#include <cstdint>
#include <vector>

namespace invar {

// Releases a table's spare capacity once it is over twice its size (and more than a few rows):
// growth doubles it again, so a size going back and forth does not reallocate at every step.
template <typename T>
void capacity_fit(std::vector<T>& v) {
  if (v.capacity() > 2 * v.size() + 16) v.shrink_to_fit();
}

template <typename T>
int64_t capacity_bytes(const std::vector<T>& v) {
  return static_cast<int64_t>(v.capacity() * sizeof(T));
}

}  // namespace invar
