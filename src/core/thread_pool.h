// A fixed set of worker threads that split *outputs* among themselves, never a reduction
// (DESIGN rule N2): every output element is computed by exactly one thread with the same
// sequence of operations it would use alone, so results do not depend on the thread count.
//
// A decode step dispatches hundreds of small jobs (a 0.5 MB matrix takes ~10 µs), so waking a
// sleeping thread through the kernel for each would cost as much as the work. Workers therefore
// spin for a short while after each job, watching an atomic generation counter, and only then
// block on a condition variable; the caller spins the same way for the workers to finish.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace invar {

class ThreadPool {
 public:
  // n_threads >= 1; the calling thread is one of them (n_threads - 1 workers are started).
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(begin, end, thread_index) on disjoint contiguous ranges covering [0, n), one range
  // per thread (ranges may be empty), split at multiples of `grain` (except the end). Blocks
  // until all are done. Not reentrant: fn must not call parallel_for.
  using RangeFn = std::function<void(int64_t begin, int64_t end, int thread_index)>;
  void parallel_for(int64_t n, const RangeFn& fn, int64_t grain = 1);

  // Calls fn(begin, end, thread_index) on disjoint ranges covering the units [0, n), for work
  // whose threads may run at different speeds (memory-bound matrix products on a machine that
  // other work shares). Each thread starts on the share parallel_for would give it and runs it
  // front to back, `step` units per call (a pool of one thread: one call), so its reads stay one
  // ascending stream; a thread that runs out takes the back half of the largest share not yet
  // started. Which thread runs a unit varies from run to run; what a unit computes must not depend
  // on it (rule N2). Not reentrant.
  void parallel_balanced(int64_t n, int64_t step, const RangeFn& fn);

 private:
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  // The job: written by the caller before it bumps generation_ (release), read by the workers
  // after they see the new generation (acquire).
  const RangeFn* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_grain_ = 1;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};  // workers still running the current job
  std::atomic<bool> stop_{false};
  // The slow path of both waits: only taken after a spin found nothing.
  std::mutex mu_;
  std::condition_variable cv_start_;
  std::condition_variable cv_done_;
  // parallel_balanced: the units [lo, hi) thread t has not started yet, packed as lo << 32 | hi,
  // one cache line each so that a thread taking its next step does not disturb the others.
  struct alignas(64) Share {
    std::atomic<uint64_t> range{0};
  };
  std::vector<Share> shares_;
};

}  // namespace invar
