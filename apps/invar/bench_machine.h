// This machine's limits, measured by the benches that compare against them (bench matmul, bench
// model): the register-only FMA rate and the read bandwidth of a buffer far larger than the
// caches. `now` is the bench's clock in seconds (wall, or CPU time per thread).
#pragma once

#include <vector>

#include "core/simd.h"
#include "core/thread_pool.h"

namespace invar::app {

// GFLOP/s of every pool thread running independent FMA chains on `level`'s vectors (scalar: one
// lane of an FMA instruction); best of 3.
double fma_peak_gflops(SimdLevel level, ThreadPool& pool, double (*now)());

// GB/s of the pool's threads summing disjoint parts of `buf`; median of 5.
double read_bandwidth_gbs(const std::vector<float>& buf, ThreadPool& pool, double (*now)());

}  // namespace invar::app
