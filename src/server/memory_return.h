// Memory returns after load: what a burst of large requests allocated (bodies, parsed JSON,
// responses) goes back to the system, so resident memory falls to model + live cache + fixed.
// glibc keeps freed heap memory in its arenas, and after a large free it raises its mmap
// threshold (up to 32 MiB), so later large buffers come from the heap and stay there:
// `invar serve` measured 12 → 74 MiB after 1000 rejected 2 MB requests, and 74 MiB after
// idling. Two remedies (docs/memory.md has the figures): a fixed mmap threshold (buffers over
// it are mapped and unmapped with their request), and malloc_trim once the server is idle.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

namespace invar::server {

// A fixed mmap threshold (glibc's dynamic one off): allocations of at least `bytes` are mapped
// and return to the system when freed. Process-wide; call before the threads start.
void malloc_mmap_threshold(size_t bytes);

// Calls malloc_trim(0) once the server has been idle (`idle()` true) for `idle_s` after some
// activity (`activity()` changed), checking every `idle_s` / 4.
class IdleTrimmer {
 public:
  IdleTrimmer(double idle_s, std::function<uint64_t()> activity, std::function<bool()> idle);
  ~IdleTrimmer();
  uint64_t trims() const { return trims_.load(); }

 private:
  void run();

  const double idle_s_;
  std::function<uint64_t()> activity_;
  std::function<bool()> idle_;
  std::atomic<uint64_t> trims_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace invar::server
