#include "probe/progress.h"

#include <unistd.h>

#include <cstdio>

namespace invar::probe {

bool progress_wanted() {
  return isatty(STDERR_FILENO) == 1;
}

Progress::Progress(int64_t total_requests, bool enabled)
    : total_(total_requests), enabled_(enabled), t0_(std::chrono::steady_clock::now()) {}

void Progress::show(const std::string& arm, int arm_index, int arms, const std::string& what) {
  if (!enabled_) return;
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  std::string eta = "?";
  if (done_ > 0) {
    const double left = el / double(done_) * double(total_ - done_);
    eta = std::to_string(int64_t(left + 0.5)) + " s";
  }
  std::fprintf(stderr, "\r\033[K[arm %d/%d %s] %s  request %lld/%lld  ETA %s", arm_index + 1, arms,
               arm.c_str(), what.c_str(), static_cast<long long>(done_ + 1),
               static_cast<long long>(total_), eta.c_str());
  std::fflush(stderr);
}

void Progress::request_done() {
  done_++;
}

void Progress::finish() {
  if (!enabled_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

}  // namespace invar::probe
