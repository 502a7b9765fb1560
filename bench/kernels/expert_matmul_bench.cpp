// Times one MoE wave of expert products as the forward pass dispatches it (matmul_jobs over E
// experts of `rows` gathered rows each, weights {K, N} of a K-quant type, every expert its own
// weights and activations, so they come from memory as in a layer), for A/B runs of the prefill
// kernels on a shared machine: the best of `reps` dispatches by process CPU time per thread
// repeats within ~1–3% while the neighbours' load is steady (5–10% when it changes: interleave
// the binaries and run several rounds) where wall-clock rates swing 20–50%.
//   expert_matmul_bench THREADS K N ROWS EXPERTS REPS [q4_K|q6_K]
// e.g. gate/up: 2 2048 512 160 32 15; down: 2 512 2048 160 32 15.
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

// Random quants with every F16 field set to 2^-8 (finite products, no overflow).
std::vector<uint8_t> random_weights(DType t, int64_t k, int64_t n, std::mt19937& rng) {
  std::vector<uint8_t> b(size_t(n * dtype_row_bytes(t, k)));
  for (auto& v : b) v = uint8_t(rng());
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
    std::fprintf(stderr, "usage: %s THREADS K N ROWS EXPERTS REPS [q4_K|q6_K]\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[1]), experts = std::atoi(argv[5]), reps = std::atoi(argv[6]);
  const int64_t k = std::atoll(argv[2]), n = std::atoll(argv[3]), rows = std::atoll(argv[4]);
  const DType type = argc > 7 && std::string(argv[7]) == "q6_K" ? DType::Q6_K : DType::Q4_K;
  std::mt19937 rng(1);
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<Matrix> w;
  for (int e = 0; e < experts; ++e) bytes.push_back(random_weights(type, k, n, rng));
  for (int e = 0; e < experts; ++e) w.emplace_back(type, k, n, bytes[size_t(e)].data());
  std::vector<float> x(size_t(experts * rows * k)), y(size_t(experts * rows * n));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : x) v = u(rng);
  std::vector<MatmulJob> jobs;
  for (int e = 0; e < experts; ++e)
    jobs.push_back({&w[size_t(e)], x.data() + e * rows * k, rows, y.data() + e * rows * n});
  ThreadPool pool(threads);
  std::vector<float> scratch(size_t(matmul_scratch_floats(threads)));
  std::vector<double> cpu, wall;
  for (int r = 0; r < reps + 2; ++r) {  // two warm-up dispatches
    const double c0 = seconds(CLOCK_PROCESS_CPUTIME_ID), w0 = seconds(CLOCK_MONOTONIC);
    matmul_jobs(jobs, pool, scratch);
    const double c1 = seconds(CLOCK_PROCESS_CPUTIME_ID), w1 = seconds(CLOCK_MONOTONIC);
    if (r >= 2) {
      cpu.push_back((c1 - c0) / threads);
      wall.push_back(w1 - w0);
    }
  }
  std::sort(cpu.begin(), cpu.end());
  std::sort(wall.begin(), wall.end());
  const double flop = 2.0 * double(experts * rows) * double(n) * double(k);
  std::printf(
      "%s %dx %lldx%lldx%lld, %d thread(s): CPU ms best %.3f median %.3f (%.1f / %.1f GFLOP/s), "
      "wall ms best %.3f median %.3f\n",
      std::string(dtype_name(type)).c_str(), experts, (long long)rows, (long long)n, (long long)k,
      threads, cpu[0] * 1e3, cpu[cpu.size() / 2] * 1e3, flop / cpu[0] * 1e-9,
      flop / cpu[cpu.size() / 2] * 1e-9, wall[0] * 1e3, wall[wall.size() / 2] * 1e3);
  return 0;
}
