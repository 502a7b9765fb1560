// This machine's limits, measured by the benches that compare against them (bench matmul, bench
// model): the register-only FMA rate and the read bandwidth of a buffer. `now` is the bench's
// clock in seconds (wall, or CPU time per thread).
#pragma once

#include <vector>

#include "core/simd.h"
#include "core/thread_pool.h"

namespace invar::app {

// GFLOP/s of every pool thread running independent FMA chains on `level`'s vectors (scalar: one
// lane of an FMA instruction); best of 3.
double fma_peak_gflops(SimdLevel level, ThreadPool& pool, double (*now)());

// GB/s of the pool's threads summing disjoint parts of `buf` (whole passes over it, at least 20
// ms a sample); median of 5. A buffer far larger than the caches measures DRAM.
double read_bandwidth_gbs(const std::vector<float>& buf, ThreadPool& pool, double (*now)());

}  // namespace invar::app
