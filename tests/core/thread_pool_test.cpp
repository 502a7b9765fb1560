// ThreadPool: parallel_for and parallel_balanced hand every unit to exactly one thread; a thread
// slowed down has part of its share taken over by the others.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace invar {
namespace thread_pool_test {

// Runs parallel_balanced and returns, for every unit, how many times it ran and which thread ran
// it. `wait_for_last`: thread 0's first call waits (up to 10 s) until the last unit has run, so
// the other threads finish their shares while thread 0 has not gone past its first step.
struct BalancedRun {
  std::vector<int> runs, thread;
};
BalancedRun run_balanced(ThreadPool& pool, int64_t n, int64_t step, bool wait_for_last) {
  std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
  std::vector<std::atomic<int>> thread(static_cast<size_t>(n));
  pool.parallel_balanced(n, step, [&](int64_t b, int64_t e, int t) {
    EXPECT_LT(b, e);
    if (pool.size() > 1) {
      EXPECT_LE(e - b, step);
    }
    if (wait_for_last && t == 0 && b == 0) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (runs[size_t(n - 1)].load() == 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    for (int64_t u = b; u < e; ++u) {
      runs[size_t(u)].fetch_add(1);
      thread[size_t(u)].store(t);
    }
  });
  BalancedRun r;
  for (int64_t u = 0; u < n; ++u) {
    r.runs.push_back(runs[size_t(u)].load());
    r.thread.push_back(thread[size_t(u)].load());
  }
  return r;
}

TEST(ThreadPool, BalancedRunsEveryUnitOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 5, 16, 97, 1000}) {
      for (int64_t step : {1, 3, 64}) {
        const BalancedRun r = run_balanced(pool, n, step, false);
        for (int64_t u = 0; u < n; ++u)
          ASSERT_EQ(r.runs[size_t(u)], 1)
              << "unit " << u << " of " << n << ", step " << step << ", " << threads << " threads";
      }
    }
  }
}

TEST(ThreadPool, BalancedTakesOverFromASlowThread) {
  // Thread 0 starts on units [0, 100) and stays in its first step until the other thread has
  // finished its own share [100, 200), which then takes over the back of thread 0's.
  ThreadPool pool(2);
  const int64_t n = 200;
  const BalancedRun r = run_balanced(pool, n, 1, true);
  int64_t taken_over = 0;
  for (int64_t u = 0; u < n; ++u) {
    ASSERT_EQ(r.runs[size_t(u)], 1) << "unit " << u;
    if (u < n / 2 && r.thread[size_t(u)] == 1) ++taken_over;
  }
  EXPECT_GT(taken_over, 0) << "no unit of the slow thread's share ran on the other thread";
  // A thread takes the back half of a share first (thread 0 itself may not have started yet).
  EXPECT_EQ(r.thread[n / 2 - 1], 1);
}

TEST(ThreadPool, ForSplitsAtGrain) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> runs(100);
  pool.parallel_for(
      100,
      [&](int64_t b, int64_t e, int) {
        EXPECT_TRUE(b % 16 == 0);
        for (int64_t u = b; u < e; ++u) runs[size_t(u)].fetch_add(1);
      },
      16);
  for (auto& c : runs) EXPECT_EQ(c.load(), 1);
}

}  // namespace thread_pool_test
}  // namespace invar
