// Clocks and order statistics shared by the bench commands.
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace invar::app {

// CPU seconds of the whole process (every thread, user + system).
inline double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Steady-clock seconds from an arbitrary origin: the wall clock of the machine-limit probes and
// of the load clients.
inline double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The p-quantile (0..1) of v, nearest rank; 0 for no samples.
inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5))];
}

}  // namespace invar::app
