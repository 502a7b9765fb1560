#include "core/simd.h"

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"

namespace invar {
namespace {

SimdLevel detect_once() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bf16") &&
                      __builtin_cpu_supports("avx512vnni");
  if (avx512) return SimdLevel::avx512;
  if (avx2) return SimdLevel::avx2;
#endif
  return SimdLevel::scalar;
}

std::atomic<int> g_active{-1};

constexpr int kLevels = 3;

// One thread's kernel calls per level; only that thread writes them, simd_calls reads them.
struct ThreadCalls {
  std::atomic<uint64_t> n[kLevels] = {};
  ThreadCalls();
  ~ThreadCalls();
};

// Every live thread's counters, and the sums of the threads that have exited. Never destroyed:
// a thread still running at exit may count after static destructors ran.
struct CallRegistry {
  std::mutex mu;
  std::vector<ThreadCalls*> live;
  uint64_t exited[kLevels] = {};
};
CallRegistry& registry() {
  static CallRegistry* r = new CallRegistry;
  return *r;
}

ThreadCalls::ThreadCalls() {
  CallRegistry& r = registry();
  std::lock_guard lock(r.mu);
  r.live.push_back(this);
}

ThreadCalls::~ThreadCalls() {
  CallRegistry& r = registry();
  std::lock_guard lock(r.mu);
  for (int l = 0; l < kLevels; ++l) r.exited[l] += n[l].load(std::memory_order_relaxed);
  std::erase(r.live, this);
}

thread_local ThreadCalls t_calls;

}  // namespace

SimdLevel simd_detect() {
  static const SimdLevel level = detect_once();
  return level;
}

SimdLevel simd_active() {
  int v = g_active.load(std::memory_order_relaxed);
  if (v < 0) return simd_detect();
  return SimdLevel(v);
}

void simd_set(SimdLevel level) {
  if (int(level) > int(simd_detect())) {
    throw Error("this CPU does not support --simd " + std::string(simd_name(level)) +
                " (best available: " + std::string(simd_name(simd_detect())) + ")");
  }
  g_active.store(int(level), std::memory_order_relaxed);
}

void simd_count(SimdLevel level) {
  // Single writer: a load and a store, no read-modify-write.
  std::atomic<uint64_t>& c = t_calls.n[int(level)];
  c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

uint64_t simd_calls(SimdLevel level) {
  CallRegistry& r = registry();
  std::lock_guard lock(r.mu);
  uint64_t sum = r.exited[int(level)];
  for (const ThreadCalls* t : r.live) sum += t->n[int(level)].load(std::memory_order_relaxed);
  return sum;
}

std::optional<SimdLevel> simd_parse(std::string_view s) {
  if (s == "off" || s == "scalar") return SimdLevel::scalar;
  if (s == "avx2") return SimdLevel::avx2;
  if (s == "avx512") return SimdLevel::avx512;
  return std::nullopt;
}

std::string_view simd_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::scalar:
      return "off";
    case SimdLevel::avx2:
      return "avx2";
    case SimdLevel::avx512:
      return "avx512";
  }
  return "?";
}

}  // namespace invar
