// The grammar masks of a step computed while its forward pass runs. A constrained sequence that
// reaches a grammar state it has not seen costs one vocabulary-trie walk (~10 ms over 151k ids:
// docs/structured-output.md); the step needs that mask only once the forward pass has produced
// the row it applies to, so the walk runs on this thread meanwhile instead of after it.
//
// Under the contract: the mask is a pure function of the grammar state (grammar/matcher.h), so
// which thread computes it, and whether it did before the row arrived, changes no bit.
//
// Use, once per step: start(constraints) → the forward pass → wait(). Between the two nothing
// else may touch those SeqConstraints. The thread is created on the first start(): an engine
// that never sees a grammar never has it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace invar {

class SeqConstraint;  // engine/constraint.h

class MaskPrefetch {
 public:
  MaskPrefetch() = default;
  MaskPrefetch(const MaskPrefetch&) = delete;
  MaskPrefetch& operator=(const MaskPrefetch&) = delete;
  ~MaskPrefetch();

  // Begins SeqConstraint::prefetch() of each, in order, on the prefetch thread. An empty list
  // does nothing. Requires the previous start() to have been waited for.
  void start(const std::vector<SeqConstraint*>& work);
  // Returns once every prefetch of the last start() has finished.
  void wait();
  // Masks computed on the prefetch thread so far (for metrics and tests).
  uint64_t computed() const { return computed_.load(std::memory_order_relaxed); }

 private:
  void loop();

  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<SeqConstraint*> work_;  // guarded by mu_
  bool busy_ = false, quit_ = false;  // guarded by mu_
  std::atomic<uint64_t> computed_{0};
};

}  // namespace invar
