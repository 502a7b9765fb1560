// Progress on a terminal (arm, run, ETA) on stderr; silent when stderr is not a TTY.
#pragma once

#include <chrono>
#include <string>

namespace invar::probe {

class Progress {
 public:
  Progress(int64_t total_requests, bool enabled);
  // Before request `done`+1 of the total.
  void show(const std::string& arm, int arm_index, int arms, const std::string& what);
  void request_done();
  void finish();

 private:
  int64_t total_, done_ = 0;
  bool enabled_;
  std::chrono::steady_clock::time_point t0_;
};

// Whether progress should be shown: stderr is a terminal.
bool progress_wanted();

}  // namespace invar::probe
