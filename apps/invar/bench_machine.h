// This machine's limits, measured by the benches that compare against them (bench matmul, bench
// model): the register-only FMA rate and the read bandwidth of a buffer. `now` is the bench's
// clock in seconds (wall, or CPU time per thread).
#pragma once

#include <string>
#include <vector>

#include "core/simd.h"
#include "core/thread_pool.h"

namespace invar::app {

// GFLOP/s of every pool thread running independent FMA chains on `level`'s vectors (scalar: one
// lane of an FMA instruction); best of 3.
double fma_peak_gflops(SimdLevel level, ThreadPool& pool, double (*now)());

// The read-bandwidth probe's buffer: n floats of 1.0, in 2 MiB pages when `huge` (the pages the
// weights have with --huge-pages: through 4 KiB pages the same bytes stream slower, so weights in
// huge pages would read faster than a 4 KiB-page limit), else in the allocator's pages.
class ProbeBuffer {
 public:
  ProbeBuffer(size_t n, bool huge);
  ~ProbeBuffer();
  ProbeBuffer(const ProbeBuffer&) = delete;
  ProbeBuffer& operator=(const ProbeBuffer&) = delete;
  const float* data() const { return data_; }
  size_t size() const { return n_; }
  bool huge() const { return mapped_ != 0; }

 private:
  float* data_ = nullptr;
  size_t n_ = 0, mapped_ = 0;  // mapped_: the huge-page mapping's length, 0 for a heap buffer
  std::vector<float> heap_;
};

// GB/s of the pool's threads summing disjoint parts of `buf` (whole passes over it, at least 20
// ms a sample); median of 5. A buffer far larger than the caches measures DRAM.
double read_bandwidth_gbs(const ProbeBuffer& buf, ThreadPool& pool, double (*now)());

// The CPU's name as /proc/cpuinfo gives it ("model name"), "" when it says none.
std::string cpu_model_name();

}  // namespace invar::app
