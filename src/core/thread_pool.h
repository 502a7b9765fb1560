// A fixed set of worker threads that split *outputs* among themselves, never a reduction
// (DESIGN rule N2): every output element is computed by exactly one thread with the same
// sequence of operations it would use alone, so results do not depend on the thread count.
#pragma once

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

 private:
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_start_;
  std::condition_variable cv_done_;
  const RangeFn* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_grain_ = 1;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace invar
