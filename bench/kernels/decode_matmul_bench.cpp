// Times M = 1 products (decode) of one weight type streamed from memory, for A/B runs of the
// decode kernels: `copies` copies of a {K, N} matrix (together well past the last-level cache
// unless asked otherwise) are used in turn, so every product reads its weights from DRAM as a
// decoded token does. Prints the weight bytes read per second (best and median of `reps`
// samples of at least 50 ms each) by wall clock and by CPU time per thread.
//   decode_matmul_bench THREADS K N TYPE MIB REPS
// e.g. 2 2048 151669 q8_0 1024 7 (the output projection); MIB 2: one copy that stays in L2.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "quant/blocks.h"
#include "quant/dtype.h"

namespace {

using namespace invar;

double seconds(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// Random bytes with every F16 field set to 2^-8 (a normal scale, as real files have; finite
// products). F32 / F16 / BF16 matrices get small random values instead.
std::vector<uint8_t> random_weights(DType t, int64_t k, int64_t n, std::mt19937& rng) {
  std::vector<uint8_t> b(size_t(n * dtype_row_bytes(t, k)));
  if (t == DType::F32) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (size_t i = 0; i < b.size(); i += 4) {
      const float v = u(rng);
      std::memcpy(&b[i], &v, 4);
    }
    return b;
  }
  for (auto& v : b) v = uint8_t(rng());
  if (t == DType::F16 || t == DType::BF16) {
    for (size_t i = 1; i < b.size(); i += 2) b[i] = uint8_t(0x3c | (b[i] & 0x80));
    return b;
  }
  const uint16_t scale = 0x1c00;
  const int64_t block = dtype_block_bytes(t);
  for (size_t o = 0; o < b.size(); o += size_t(block)) {
    for (size_t f : quant_f16_offsets(t)) std::memcpy(&b[o + f], &scale, 2);
  }
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: %s THREADS K N TYPE MIB REPS\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[1]), reps = std::atoi(argv[6]);
  const int64_t k = std::atoll(argv[2]), n = std::atoll(argv[3]), mib = std::atoll(argv[5]);
  const auto type = dtype_parse(argv[4]);
  if (!type || k % dtype_block_size(*type) != 0) {
    std::fprintf(stderr, "unknown type '%s' or K not a multiple of its block\n", argv[4]);
    return 2;
  }
  const int64_t bytes = n * dtype_row_bytes(*type, k);
  const int64_t copies = std::max<int64_t>(1, (mib << 20) / bytes);
  std::mt19937 rng(1);
  std::vector<std::vector<uint8_t>> data;
  std::vector<Matrix> w;
  for (int64_t c = 0; c < copies; ++c) data.push_back(random_weights(*type, k, n, rng));
  for (int64_t c = 0; c < copies; ++c) w.emplace_back(*type, k, n, data[size_t(c)].data());
  std::vector<float> x(static_cast<size_t>(k)), y(static_cast<size_t>(n));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : x) v = u(rng);
  ThreadPool pool(threads);
  std::vector<float> scratch(size_t(matmul_scratch_floats(threads)));
  std::vector<double> cpu, wall;
  int64_t next = 0;
  for (int r = 0; r < reps + 1; ++r) {  // one warm-up sample
    const double c0 = seconds(CLOCK_PROCESS_CPUTIME_ID), w0 = seconds(CLOCK_MONOTONIC);
    int64_t products = 0;
    double w1 = w0;
    do {
      matmul(w[size_t(next)], x.data(), 1, y.data(), pool, scratch);
      next = (next + 1) % copies;
      ++products;
      w1 = seconds(CLOCK_MONOTONIC);
    } while (w1 - w0 < 0.05);
    const double c1 = seconds(CLOCK_PROCESS_CPUTIME_ID);
    if (r >= 1) {
      cpu.push_back(double(products * bytes) / ((c1 - c0) / threads) * 1e-9);
      wall.push_back(double(products * bytes) / (w1 - w0) * 1e-9);
    }
  }
  std::sort(cpu.rbegin(), cpu.rend());
  std::sort(wall.rbegin(), wall.rend());
  std::printf(
      "%s 1x%lldx%lld, %lld cop%s of %.1f MB, %d thread(s): GB/s wall best %.2f median "
      "%.2f, CPU best %.2f median %.2f\n",
      argv[4], (long long)n, (long long)k, (long long)copies, copies == 1 ? "y" : "ies",
      double(bytes) / 1e6, threads, wall[0], wall[wall.size() / 2], cpu[0], cpu[cpu.size() / 2]);
  return 0;
}
