#include "server/prepare_pool.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ctime>

namespace invar::server {

PreparePool::PreparePool(int threads, size_t max_waiting) : max_waiting_(max_waiting) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
}

PreparePool::~PreparePool() {
  stop();
}

bool PreparePool::submit(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || jobs_.size() >= max_waiting_) return false;
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

size_t PreparePool::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_.size();
}

void PreparePool::stop() {
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
    dropped.swap(jobs_);
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void PreparePool::run() {
  // Below the IO and engine threads: preparation takes what CPU they leave. Linux applies a
  // nice value per thread; where it cannot be set the thread runs at the normal priority.
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10);
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

ApiError prepare_cpu_over(double used_s, double budget_s, const std::string& what) {
  return bad_request("", "preparing this request took " + std::to_string(used_s) + " s of CPU (" +
                             what + "), over the per-request budget of " +
                             std::to_string(budget_s) +
                             " s (--prepare-cpu-seconds): send a smaller request");
}

}  // namespace invar::server
