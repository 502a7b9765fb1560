// Where large requests are prepared — their JSON parsed and checked, their prompt rendered and
// tokenised — so that this work never runs on the IO threads: a connection's reads and writes,
// and the small requests that are prepared inline, never wait behind another request's
// preparation. A few threads at a lower CPU priority (nice 10) than the IO and engine threads,
// and a bounded queue: a request past it is refused (429) instead of held.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/api_error.h"

namespace invar::server {

class PreparePool {
 public:
  PreparePool(int threads, size_t max_waiting);
  ~PreparePool();  // stop()s
  PreparePool(const PreparePool&) = delete;
  PreparePool& operator=(const PreparePool&) = delete;

  // Queues the job; false when max_waiting jobs already wait (or after stop()).
  bool submit(std::function<void()> job);
  size_t waiting() const;  // queued, not yet started
  size_t max_waiting() const { return max_waiting_; }
  // Stops taking jobs, drops those not started (their owners hold what they need to notice)
  // and joins the threads.
  void stop();

 private:
  void run();

  const size_t max_waiting_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// CPU seconds the calling thread has used (CLOCK_THREAD_CPUTIME_ID).
double thread_cpu_seconds();

// The 400 of a request whose preparation took used_s of CPU, over budget_s
// (--prepare-cpu-seconds); `what`: the step that found it.
ApiError prepare_cpu_over(double used_s, double budget_s, const std::string& what);

}  // namespace invar::server
