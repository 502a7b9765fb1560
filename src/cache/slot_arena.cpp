#include "cache/slot_arena.h"

#include "core/error.h"

namespace invar {

SlotArena::SlotArena(int64_t slot_floats, int64_t n_slots) {
  INVAR_CHECK(slot_floats >= 0 && n_slots >= 0 && n_slots < (int64_t{1} << 31));
  stride_ = (slot_floats + 15) / 16 * 16;
  if (stride_ == 0) stride_ = 16;  // a model without a recurrent layer still gets distinct ids
  n_slots_ = n_slots;
  const int64_t bytes = stride_ * n_slots_ * static_cast<int64_t>(sizeof(float));
  if (bytes > 0) {
    mem_.reset(static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(bytes))));
    if (!mem_) throw Error("cannot reserve " + std::to_string(bytes) + " bytes for the cache");
  }
  free_.reserve(static_cast<size_t>(n_slots_));
  for (int64_t i = n_slots_ - 1; i >= 0; --i) free_.push_back(static_cast<int32_t>(i));
  used_.assign(static_cast<size_t>(n_slots_), 0);
}

int32_t SlotArena::acquire() {
  if (free_.empty()) return -1;
  const int32_t s = free_.back();
  free_.pop_back();
  used_[static_cast<size_t>(s)] = 1;
  return s;
}

void SlotArena::release(int32_t slot) {
  INVAR_CHECK(slot >= 0 && slot < n_slots_ && used_[static_cast<size_t>(slot)],
              "slot " + std::to_string(slot));
  used_[static_cast<size_t>(slot)] = 0;
  free_.push_back(slot);
}

}  // namespace invar
