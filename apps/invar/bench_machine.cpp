// Measured machine limits (bench_machine.h). The loops use their ISA through target attributes,
// so the file needs no ISA flags; callers only ask for a level the CPU has.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC bug 105593 in AVX-512 intrinsics
#endif

#include "bench_machine.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <new>

#include "core/zero_pages.h"

namespace invar::app {
namespace {

// Register-only FMA chains: 12 independent accumulators per thread (enough to cover the latency
// on two pipes); returns a value so the loop is not removed.
__attribute__((target("avx512f,fma"))) float fma_loop_avx512(int64_t iters) {
  __m512 a[12];
  for (int j = 0; j < 12; ++j) a[j] = _mm512_set1_ps(float(j));
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < 12; ++j) a[j] = _mm512_fmadd_ps(a[j], m, c);
  }
  float t[16], s = 0;
  for (int j = 0; j < 12; ++j) {
    _mm512_storeu_ps(t, a[j]);
    for (float v : t) s += v;
  }
  return s;
}

__attribute__((target("avx2,fma"))) float fma_loop_avx2(int64_t iters) {
  __m256 a[12];
  for (int j = 0; j < 12; ++j) a[j] = _mm256_set1_ps(float(j));
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < 12; ++j) a[j] = _mm256_fmadd_ps(a[j], m, c);
  }
  float t[8], s = 0;
  for (int j = 0; j < 12; ++j) {
    _mm256_storeu_ps(t, a[j]);
    for (float v : t) s += v;
  }
  return s;
}

__attribute__((target("fma"))) float fma_loop_scalar(int64_t iters) {
  __m128 a[12];
  for (int j = 0; j < 12; ++j) a[j] = _mm_set_ss(float(j));
  const __m128 m = _mm_set_ss(0.999999f), c = _mm_set_ss(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < 12; ++j) a[j] = _mm_fmadd_ss(a[j], m, c);
  }
  float s = 0;
  for (int j = 0; j < 12; ++j) s += _mm_cvtss_f32(a[j]);
  return s;
}

// Σ p[0..n) read as 8 streams side by side (the 8 contiguous eighths of the range), as the
// matmul's direct path reads 4 weight panels at once: one sequential stream leaves a core's
// memory parallelism unused and measures less than the kernels reach. Each stream prefetches 1
// KiB ahead, as the decode kernels do: without it the loop read ~10% less than the F32 decode
// kernel on an Intel Xeon (Emerald Rapids; 27 vs 31 GB/s on 2 threads), and decode rows came out
// above their roofline.
__attribute__((target("avx2"))) float sum_floats(const float* p, int64_t n) {
  constexpr int kStreams = 8;
  constexpr int64_t kAhead = 256;  // floats: 1 KiB, as the F32 decode kernel prefetches
  const int64_t len = n / kStreams / 16 * 16;
  __m256 a[kStreams];
  for (int s = 0; s < kStreams; ++s) a[s] = _mm256_setzero_ps();
  for (int64_t i = 0; i < len; i += 16) {
#pragma GCC unroll 8
    for (int s = 0; s < kStreams; ++s) {
      const float* q = p + s * len + i;
      _mm_prefetch(reinterpret_cast<const char*>(q + kAhead), _MM_HINT_T0);
      a[s] = _mm256_add_ps(a[s], _mm256_loadu_ps(q));
      a[s] = _mm256_add_ps(a[s], _mm256_loadu_ps(q + 8));
    }
  }
  float t[8], sum = 0;
  for (int s = 0; s < kStreams; ++s) {
    _mm256_storeu_ps(t, a[s]);
    for (float v : t) sum += v;
  }
  return sum;
}

}  // namespace

double fma_peak_gflops(SimdLevel level, ThreadPool& pool, double (*now)()) {
  const int64_t iters = 4'000'000;
  const int lanes = level == SimdLevel::avx512 ? 16 : level == SimdLevel::avx2 ? 8 : 1;
  auto* loop = level == SimdLevel::avx512 ? &fma_loop_avx512
               : level == SimdLevel::avx2 ? &fma_loop_avx2
                                          : &fma_loop_scalar;
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<float> sink(size_t(pool.size()));
    const double t0 = now();
    pool.parallel_for(pool.size(), [&](int64_t, int64_t, int t) { sink[size_t(t)] = loop(iters); });
    const double s = now() - t0;
    best = std::max(best, double(pool.size()) * double(iters) * 12 * lanes * 2 / s / 1e9);
    if (sink[0] == 12345.0f) std::printf(" ");
  }
  return best;
}

ProbeBuffer::ProbeBuffer(size_t n, bool huge) : n_(n) {
  if (huge) {
    data_ = static_cast<float*>(huge_pages_alloc(n * sizeof(float), &mapped_));
    if (data_ == nullptr) throw std::bad_alloc();
    std::fill(data_, data_ + n, 1.0f);
  } else {
    heap_.assign(n, 1.0f);
    data_ = heap_.data();
  }
}

ProbeBuffer::~ProbeBuffer() {
  if (mapped_ != 0) zero_pages_free(data_, mapped_);
}

double read_bandwidth_gbs(const ProbeBuffer& buf, ThreadPool& pool, double (*now)()) {
  std::vector<double> gbs;
  std::vector<float> sink(size_t(pool.size()));
  for (int rep = 0; rep < 5; ++rep) {
    // Whole passes until the sample lasts 20 ms (a cache-sized buffer takes microseconds).
    int64_t passes = 0;
    const double t0 = now();
    double dt = 0;
    do {
      pool.parallel_for(
          int64_t(buf.size()),
          [&](int64_t b, int64_t e, int t) {
            sink[size_t(t)] += sum_floats(buf.data() + b, e - b);
          },
          1 << 16);
      ++passes;
      dt = now() - t0;
    } while (dt < 0.02);
    gbs.push_back(double(buf.size()) * 4 * double(passes) / dt / 1e9);
  }
  if (sink[0] == 12345.0f) std::printf(" ");
  std::sort(gbs.begin(), gbs.end());
  return gbs[gbs.size() / 2];
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0)
      if (const size_t colon = line.find(':'); colon != std::string::npos)
        return line.substr(line.find_first_not_of(' ', colon + 1));
  return "";
}

}  // namespace invar::app
