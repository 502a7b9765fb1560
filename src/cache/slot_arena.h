// Fixed-size float slots carved from one allocation made at start-up (STYLE 10): KV blocks and
// recurrent-state checkpoints live here, so the hot path never allocates. The allocation is
// virtual until touched, so an arena sized for the whole budget costs only what is used.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

namespace invar {

class SlotArena {
 public:
  // slot_floats ≥ 0 (rounded up to 64-byte multiples); n_slots ≥ 0.
  SlotArena(int64_t slot_floats, int64_t n_slots);
  SlotArena(const SlotArena&) = delete;
  SlotArena& operator=(const SlotArena&) = delete;

  int32_t acquire();           // a free slot, or -1 when all are in use
  void release(int32_t slot);  // slot must be in use
  float* data(int32_t slot) const { return mem_.get() + static_cast<int64_t>(slot) * stride_; }

  int64_t capacity() const { return n_slots_; }
  int64_t in_use() const { return n_slots_ - static_cast<int64_t>(free_.size()); }
  int64_t slot_bytes() const { return stride_ * static_cast<int64_t>(sizeof(float)); }

 private:
  struct FreeDeleter {
    void operator()(float* p) const { std::free(p); }
  };
  int64_t stride_ = 0;  // floats per slot
  int64_t n_slots_ = 0;
  std::unique_ptr<float, FreeDeleter> mem_;
  std::vector<int32_t> free_;  // stack of free slots (lowest id on top at start)
  std::vector<uint8_t> used_;  // [n_slots] 1 while acquired (double-release check)
};

}  // namespace invar
