#include "server/memory_return.h"

#include <malloc.h>

#include <chrono>

namespace invar::server {

void malloc_mmap_threshold(size_t bytes) {
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(bytes));
}

IdleTrimmer::IdleTrimmer(double idle_s, std::function<uint64_t()> activity,
                         std::function<bool()> idle)
    : idle_s_(idle_s),
      activity_(std::move(activity)),
      idle_(std::move(idle)),
      thread_([this] { run(); }) {}

IdleTrimmer::~IdleTrimmer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void IdleTrimmer::run() {
  using Clock = std::chrono::steady_clock;
  const auto tick = std::chrono::duration<double>(idle_s_ / 4);
  uint64_t trimmed_at = activity_();
  uint64_t seen = trimmed_at;
  auto quiet_since = Clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, tick, [&] { return stop_; })) {
    const uint64_t now = activity_();
    if (now != seen || !idle_()) {
      seen = now;
      quiet_since = Clock::now();
      continue;
    }
    if (seen == trimmed_at ||
        std::chrono::duration<double>(Clock::now() - quiet_since).count() < idle_s_)
      continue;
    malloc_trim(0);
    trimmed_at = seen;
    ++trims_;
  }
}

}  // namespace invar::server
