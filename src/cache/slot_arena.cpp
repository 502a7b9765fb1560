#include "cache/slot_arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "cache/table_capacity.h"
#include "core/error.h"

namespace invar {

namespace {

constexpr int64_t kSegmentTarget = int64_t{2} << 20;  // bytes per segment, about

int64_t page_bytes() {
  static const int64_t page = sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096;
  return page;
}

// Gives back the whole pages inside [begin, end); returns their bytes.
int64_t pages_release(uintptr_t begin, uintptr_t end) {
  const auto page = static_cast<uintptr_t>(page_bytes());
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (last <= first) return 0;
  madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
  return static_cast<int64_t>(last - first);
}

}  // namespace

int64_t SlotArena::slot_bytes_for(int64_t slot_floats) {
  INVAR_CHECK(slot_floats >= 0);
  return (slot_floats + 15) / 16 * 16 * static_cast<int64_t>(sizeof(float));
}

SlotArena::SlotArena(int64_t slot_floats, int64_t max_slots) {
  INVAR_CHECK(slot_floats >= 0 && max_slots >= 0 && max_slots < (int64_t{1} << 31));
  stride_ = slot_bytes_for(slot_floats) / static_cast<int64_t>(sizeof(float));
  max_slots_ = max_slots;
  if (stride_ > 0) {
    const int64_t page = page_bytes();
    per_segment_ = std::max<int64_t>(1, kSegmentTarget / slot_bytes());
    segment_bytes_ = (per_segment_ * slot_bytes() + page - 1) / page * page;
  }
}

SlotArena::~SlotArena() {
  for (float* s : segments_) munmap(s, static_cast<size_t>(segment_bytes_));
}

float* SlotArena::segment_make() {
  // Anonymous pages: nothing is resident until a slot is first written.
  void* p = mmap(nullptr, static_cast<size_t>(segment_bytes_), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw Error("cannot map " + std::to_string(segment_bytes_) + " bytes for the cache");
  return static_cast<float*>(p);
}

int32_t SlotArena::acquire() {
  int32_t s;
  if (!free_.empty()) {
    std::pop_heap(free_.begin(), free_.end(), std::greater<>());
    s = free_.back();
    free_.pop_back();
  } else {
    if (n_made_ == max_slots_) return -1;
    if (stride_ > 0 && n_made_ % per_segment_ == 0) segments_.push_back(segment_make());
    s = static_cast<int32_t>(n_made_++);
    state_.push_back(kCold);
  }
  if (state_[static_cast<size_t>(s)] != kFree) ++n_warm_;
  state_[static_cast<size_t>(s)] = kUsed;
  ++n_changes_;
  return s;
}

void SlotArena::release(int32_t slot) {
  INVAR_CHECK(slot >= 0 && slot < n_made_ && state_[static_cast<size_t>(slot)] == kUsed,
              "slot " + std::to_string(slot));
  state_[static_cast<size_t>(slot)] = kFree;
  free_.push_back(slot);
  std::push_heap(free_.begin(), free_.end(), std::greater<>());
  ++n_changes_;
}

int32_t SlotArena::move_down(int32_t slot) {
  INVAR_CHECK(used(slot), "slot " + std::to_string(slot));
  if (free_.empty() || free_.front() > slot) return slot;
  const int32_t to = acquire();
  if (stride_ > 0) std::memcpy(data(to), data(slot), static_cast<size_t>(slot_bytes()));
  release(slot);
  return to;
}

int64_t SlotArena::shrink() {
  int64_t n = n_made_;
  while (n > 0 && state_[static_cast<size_t>(n - 1)] != kUsed) --n;
  if (n == n_made_) return 0;
  for (int64_t s = n; s < n_made_; ++s) n_warm_ -= state_[static_cast<size_t>(s)] == kFree;
  if (stride_ > 0) {
    const auto kept = static_cast<size_t>((n + per_segment_ - 1) / per_segment_);
    for (size_t g = kept; g < segments_.size(); ++g)
      munmap(segments_[g], static_cast<size_t>(segment_bytes_));
    segments_.resize(kept);
    // The un-made slots of the last kept segment start cold when made again.
    if (n % per_segment_ != 0) {
      const auto end =
          reinterpret_cast<uintptr_t>(segments_.back()) + static_cast<uintptr_t>(segment_bytes_);
      pages_release(reinterpret_cast<uintptr_t>(data(static_cast<int32_t>(n))), end);
    }
  }
  const int64_t unmade = n_made_ - n;
  n_made_ = n;
  state_.resize(static_cast<size_t>(n));
  std::erase_if(free_, [n](int32_t s) { return s >= n; });
  std::make_heap(free_.begin(), free_.end(), std::greater<>());
  capacity_fit(state_);
  capacity_fit(free_);
  capacity_fit(segments_);
  return unmade;
}

int64_t SlotArena::bytes_tables() const {
  return capacity_bytes(free_) + capacity_bytes(state_) + capacity_bytes(segments_);
}

int64_t SlotArena::trim() {
  if (stride_ == 0) return 0;
  int64_t freed = 0;
  for (int32_t s : free_) {
    if (state_[static_cast<size_t>(s)] != kFree) continue;
    state_[static_cast<size_t>(s)] = kCold;
    --n_warm_;
    // Only pages wholly inside the slot: its neighbours may be in use.
    const auto begin = reinterpret_cast<uintptr_t>(data(s));
    freed += pages_release(begin, begin + static_cast<uintptr_t>(slot_bytes()));
  }
  return freed;
}

void SlotArena::check_invariants() const {
  INVAR_CHECK(static_cast<int64_t>(state_.size()) == n_made_ && n_made_ <= max_slots_);
  int64_t free = 0, warm = 0;
  for (uint8_t st : state_) {
    free += st != kUsed;
    warm += st != kCold;
  }
  INVAR_CHECK(free == static_cast<int64_t>(free_.size()) && warm == n_warm_,
              "free list or warm count disagrees with the slot states");
  INVAR_CHECK(std::is_heap(free_.begin(), free_.end(), std::greater<>()));
  std::vector<uint8_t> listed(state_.size(), 0);
  for (int32_t s : free_)
    INVAR_CHECK(s >= 0 && s < n_made_ && state_[static_cast<size_t>(s)] != kUsed &&
                    !listed[static_cast<size_t>(s)]++,
                "free list entry " + std::to_string(s));
  const int64_t segments = stride_ > 0 ? (n_made_ + per_segment_ - 1) / per_segment_ : 0;
  INVAR_CHECK(static_cast<int64_t>(segments_.size()) == segments, "segments past the last id");
}

}  // namespace invar
