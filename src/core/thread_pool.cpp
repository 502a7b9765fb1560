#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace invar {
namespace {

// How long a thread spins for the next event before it blocks: longer than the gaps between the
// dispatches of one forward pass (single-threaded steps of a few µs to tens of µs), far shorter
// than the gaps between requests.
constexpr auto kSpin = std::chrono::microseconds(100);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until done() or kSpin has passed; returns done(). Between short runs of pause it yields
// the core, so on a machine with more runnable threads than cores the thread it waits for (or
// any other) runs instead of the spin.
template <class Done>
bool spin_until(Done&& done) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    for (int i = 0; i < 16; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    std::this_thread::yield();
    if (std::chrono::steady_clock::now() - t0 > kSpin) return done();
  }
}

// Range of thread `t` out of `n_threads` over [0, n) in units of `grain`.
void split_range(int64_t n, int64_t grain, int n_threads, int t, int64_t* begin, int64_t* end) {
  const int64_t units = (n + grain - 1) / grain;
  const int64_t per = units / n_threads;
  const int64_t extra = units % n_threads;
  const int64_t u0 = t * per + (t < extra ? t : extra);
  const int64_t u1 = u0 + per + (t < extra ? 1 : 0);
  *begin = std::min(n, u0 * grain);
  *end = std::min(n, u1 * grain);
}

uint64_t share_pack(int64_t lo, int64_t hi) {
  return uint64_t(lo) << 32 | uint64_t(hi);
}
int64_t share_lo(uint64_t v) {
  return int64_t(v >> 32);
}
int64_t share_hi(uint64_t v) {
  return int64_t(v & 0xffffffffu);
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads), shares_(size_t(n_threads)) {
  INVAR_CHECK(n_threads >= 1);
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true, std::memory_order_release);
  }
  cv_start_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::parallel_for(int64_t n, const RangeFn& fn, int64_t grain) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (n_threads_ == 1 || n <= grain) {
    fn(0, n, 0);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  job_grain_ = grain;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    // Under the mutex so that a worker between its last check and its wait cannot miss it.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_start_.notify_all();
  int64_t b, e;
  split_range(n, grain, n_threads_, 0, &b, &e);
  if (b < e) fn(b, e, 0);
  auto done = [this] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(done)) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_done_.wait(lock, done);
  }
  job_ = nullptr;
}

void ThreadPool::parallel_balanced(int64_t n, int64_t step, const RangeFn& fn) {
  if (n <= 0) return;
  INVAR_CHECK(n < (int64_t(1) << 31), "parallel_balanced: too many units");
  step = std::max<int64_t>(step, 1);
  if (n_threads_ == 1 || n <= step) {
    fn(0, n, 0);
    return;
  }
  for (int t = 0; t < n_threads_; ++t) {
    int64_t b, e;
    split_range(n, 1, n_threads_, t, &b, &e);
    shares_[size_t(t)].range.store(share_pack(b, e), std::memory_order_relaxed);
  }
  // parallel_for publishes the shares to the workers (its generation bump releases them).
  parallel_for(n_threads_, [&](int64_t t, int64_t, int thread_index) {
    std::atomic<uint64_t>& own = shares_[size_t(t)].range;
    for (;;) {
      // The next step of the own share, from its front.
      uint64_t v = own.load(std::memory_order_acquire);
      const int64_t lo = share_lo(v), hi = share_hi(v);
      if (lo < hi) {
        const int64_t mid = std::min(hi, lo + step);
        if (own.compare_exchange_weak(v, share_pack(mid, hi), std::memory_order_acq_rel))
          fn(lo, mid, thread_index);
        continue;
      }
      // The own share is done: take the back half of the largest other one.
      int victim = -1;
      int64_t most = 0;
      for (int u = 0; u < n_threads_; ++u) {
        const uint64_t w = shares_[size_t(u)].range.load(std::memory_order_acquire);
        if (share_hi(w) - share_lo(w) > most) {
          most = share_hi(w) - share_lo(w);
          victim = u;
        }
      }
      if (victim < 0) return;
      std::atomic<uint64_t>& other = shares_[size_t(victim)].range;
      uint64_t w = other.load(std::memory_order_acquire);
      const int64_t wlo = share_lo(w), whi = share_hi(w);
      if (wlo >= whi) continue;
      const int64_t cut = wlo + (whi - wlo) / 2;
      if (other.compare_exchange_strong(w, share_pack(wlo, cut), std::memory_order_acq_rel))
        own.store(share_pack(cut, whi), std::memory_order_release);
    }
  });
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    auto ready = [&] {
      return stop_.load(std::memory_order_acquire) ||
             generation_.load(std::memory_order_acquire) != seen;
    };
    if (!spin_until(ready)) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_start_.wait(lock, ready);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    int64_t b, e;
    split_range(job_n_, job_grain_, n_threads_, index, &b, &e);
    if (b < e) (*job_)(b, e, index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // Under the mutex so that a caller between its last check and its wait cannot miss it.
      std::lock_guard<std::mutex> lock(mu_);
      cv_done_.notify_one();
    }
  }
}

}  // namespace invar
