#include "core/simd.h"

#include <atomic>
#include <string>

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
