// Fixed-size float slots for KV blocks and recurrent-state checkpoints (STYLE 10: the hot path
// never allocates once a slot id has been used). Storage grows in segments as new ids are first
// handed out, and the lowest free id is reused before a new one is made, so ids in use stay
// packed at the bottom and memory follows the slots in use, never the theoretical capacity:
// shrink() un-makes the free ids above the highest one in use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace invar {

class SlotArena {
 public:
  // Bytes one slot of slot_floats floats occupies: rounded up to 64-byte multiples (cache lines,
  // aligned vector loads); 0 floats take no memory at all (ids only).
  static int64_t slot_bytes_for(int64_t slot_floats);
  // Bytes of bookkeeping per slot id made (free list + in-use flag).
  static constexpr int64_t kIdBytes = sizeof(int32_t) + sizeof(uint8_t);

  // slot_floats ≥ 0; max_slots ≥ 0 ids at most.
  SlotArena(int64_t slot_floats, int64_t max_slots);
  ~SlotArena();
  SlotArena(const SlotArena&) = delete;
  SlotArena& operator=(const SlotArena&) = delete;

  int32_t acquire();           // the lowest free slot, or -1 when all max_slots are in use
  void release(int32_t slot);  // slot must be in use
  bool used(int32_t slot) const {
    return slot >= 0 && slot < n_made_ && state_[static_cast<size_t>(slot)] == kUsed;
  }
  // Moves an in-use slot's contents to the lowest free id when that is below it, releasing the
  // old one; returns the slot's id after the move (slot itself when no lower id is free).
  int32_t move_down(int32_t slot);
  float* data(int32_t slot) const {
    if (stride_ == 0) return nullptr;
    return segments_[static_cast<size_t>(slot / per_segment_)] +
           static_cast<int64_t>(slot % per_segment_) * stride_;
  }
  // Returns the memory of free slots to the system (whole pages inside them); their next use
  // starts from zeroed pages. Returns the bytes given back.
  int64_t trim();
  // Un-makes the free ids above the highest one in use: made() falls to 1 + that id, whole
  // segments past it are unmapped, the pages of un-made slots in the last one given back, and
  // the tables release their capacity once it is over twice their size (a table regrows by
  // doubling, so a steady workload does not thrash). Returns the ids un-made.
  int64_t shrink();

  int64_t capacity() const { return max_slots_; }
  int64_t in_use() const { return n_made_ - static_cast<int64_t>(free_.size()); }
  int64_t made() const { return n_made_; }  // ids 0..made−1 exist (storage exists for these)
  int64_t changes() const { return n_changes_; }  // acquires + releases so far
  int64_t slot_bytes() const { return stride_ * static_cast<int64_t>(sizeof(float)); }
  // Slot memory that may be resident: in-use slots plus free slots not trimmed since last use.
  int64_t bytes_warm() const { return n_warm_ * slot_bytes(); }
  // What the per-id tables (free list, states, segment list) hold allocated.
  int64_t bytes_tables() const;
  // Aborts if the free list, the states and the segments disagree (tests).
  void check_invariants() const;

 private:
  // kCold: free, and its memory never written or given back by trim().
  static constexpr uint8_t kFree = 0, kCold = 1, kUsed = 2;
  float* segment_make();

  int64_t stride_ = 0;  // floats per slot
  int64_t max_slots_ = 0;
  int64_t per_segment_ = 1;    // slots per segment
  int64_t segment_bytes_ = 0;  // one segment's allocation, whole pages
  int64_t n_made_ = 0;         // ids 0..n_made_−1 exist
  int64_t n_warm_ = 0;         // slots whose memory may be resident
  int64_t n_changes_ = 0;
  std::vector<float*> segments_;
  std::vector<int32_t> free_;   // min-heap of released ids (the lowest on top)
  std::vector<uint8_t> state_;  // [n_made_] kFree, kCold or kUsed
};

}  // namespace invar
