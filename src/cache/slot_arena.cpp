#include "cache/slot_arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#include "core/error.h"

namespace invar {

namespace {

// kCold: free, and its memory never written or given back by trim().
constexpr uint8_t kFree = 0, kCold = 1, kUsed = 2;
constexpr int64_t kSegmentTarget = int64_t{2} << 20;  // bytes per segment, about

int64_t page_bytes() {
  static const int64_t page = sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096;
  return page;
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
  return s;
}

void SlotArena::release(int32_t slot) {
  INVAR_CHECK(slot >= 0 && slot < n_made_ && state_[static_cast<size_t>(slot)] == kUsed,
              "slot " + std::to_string(slot));
  state_[static_cast<size_t>(slot)] = kFree;
  free_.push_back(slot);
}

int64_t SlotArena::trim() {
  if (stride_ == 0) return 0;
  const int64_t page = page_bytes();
  int64_t freed = 0;
  for (int32_t s : free_) {
    if (state_[static_cast<size_t>(s)] != kFree) continue;
    state_[static_cast<size_t>(s)] = kCold;
    --n_warm_;
    // Only pages wholly inside the slot: its neighbours may be in use.
    const auto begin = reinterpret_cast<uintptr_t>(data(s));
    const uintptr_t first = (begin + static_cast<uintptr_t>(page) - 1) / page * page;
    const uintptr_t last = (begin + static_cast<uintptr_t>(slot_bytes())) / page * page;
    if (last > first) {
      madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
      freed += static_cast<int64_t>(last - first);
    }
  }
  return freed;
}

}  // namespace invar
