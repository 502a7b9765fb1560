// What choosing a token costs per row: sample_token (the ranked head: one pass, a radix sort of
// the candidates that can matter) beside sample_token_ref (the definition: a heap sort of the
// whole row), for greedy, top_k 20, temperature 1, top_p 0.9 and min_p 0.05, on vocabularies of
// 151,669 (Qwen3-Next) and 248,320 (Qwen3.5) ids. Rounds interleave the two paths (A B A B) in
// one process, row by row; the table gives each one's median CPU µs per token (thread CPU time,
// so that time spent preempted on a shared machine does not count), and every pair of choices is
// checked equal. Rows, by where the cut of the ranked head (z = (l − l_max)/T ≥ −38) falls:
//   peaked  a bulk N(0, 2.5²) with one id in 500 lifted 15 ± 10 above it: the top ids ~40 above
//           the bulk, which lies past the cut (few candidates);
//   bulk    the same bulk, one id in 500 lifted 6 ± 3: the top ids ~20 above it, the whole bulk
//           within the cut (every id a candidate, most weights tiny);
//   flat    N(0, 0.5²): every id a candidate with a sizeable weight.
// Usage: sampler_bench [reps=5].
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <vector>

#include "engine/sampler.h"

namespace {

using invar::SamplerScratch;
using invar::SamplingParams;

const char* const kShapes[] = {"peaked", "bulk", "flat"};

std::vector<float> bench_row(int shape, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(n));
  for (auto& v : row) {
    if (shape == 2) {
      v = 0.5f * normal(rng);
      continue;
    }
    v = 2.5f * normal(rng);
    if (rng() % 500 == 0) v += shape == 0 ? 15.0f + 10.0f * normal(rng) : 6.0f + 3.0f * normal(rng);
  }
  return row;
}

// The thread's CPU time: the machine is shared, and a preempted call must not count the time it
// waited.
double thread_us() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e6 + double(t.tv_nsec) * 1e-3;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Config {
  const char* name;
  SamplingParams p;
};

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  constexpr int kRows = 8;  // distinct rows per round, positions 0..kRows−1
  std::vector<Config> configs(5);
  configs[0].name = "greedy";
  configs[1].name = "top_k 20";
  configs[1].p.temperature = 1.0f;
  configs[1].p.top_k = 20;
  configs[2].name = "temperature 1";
  configs[2].p.temperature = 1.0f;
  configs[3].name = "top_p 0.9";
  configs[3].p.temperature = 1.0f;
  configs[3].p.top_p = 0.9f;
  configs[4].name = "min_p 0.05";
  configs[4].p.temperature = 1.0f;
  configs[4].p.min_p = 0.05f;
  for (auto& c : configs) c.p.seed = 7;
  std::printf("%d rows x %d rounds, each row old then new; median thread-CPU µs per token\n", kRows,
              reps);
  std::printf("%-8s %-6s %-14s %12s %12s %9s\n", "vocab", "row", "sampling", "full sort", "ranked",
              "speed-up");
  SamplerScratch s;
  int mismatches = 0;
  for (int64_t n_vocab : {int64_t(151669), int64_t(248320)}) {
    for (int shape = 0; shape < 3; ++shape) {
      std::vector<std::vector<float>> rows;
      for (int r = 0; r < kRows; ++r)
        rows.push_back(bench_row(shape, n_vocab, uint64_t(100 * shape + r)));
      for (const Config& c : configs) {
        // Greedy and top_k 20 take the same path on every shape: shown once.
        if (shape > 0 && (c.p.temperature <= 0.0f || c.p.top_k > 0)) continue;
        std::vector<double> old_us, new_us;
        for (int rep = 0; rep < reps; ++rep) {
          std::vector<int32_t> old_tok(kRows), new_tok(kRows);
          for (int r = 0; r < kRows; ++r) {
            const float* row = rows[size_t(r)].data();
            double t0 = thread_us();
            old_tok[size_t(r)] = invar::sample_token_ref(row, n_vocab, c.p, r, s);
            double t1 = thread_us();
            new_tok[size_t(r)] = invar::sample_token(row, n_vocab, c.p, r, s);
            double t2 = thread_us();
            old_us.push_back(t1 - t0);
            new_us.push_back(t2 - t1);
          }
          mismatches += old_tok != new_tok;
        }
        const double o = median(old_us), w = median(new_us);
        std::printf("%-8lld %-6s %-14s %12.1f %12.1f %8.1fx\n", static_cast<long long>(n_vocab),
                    kShapes[shape], c.name, o, w, o / w);
      }
    }
  }
  std::printf("choices equal in every round: %s\n", mismatches == 0 ? "yes" : "NO");
  return mismatches == 0 ? 0 : 1;
}
