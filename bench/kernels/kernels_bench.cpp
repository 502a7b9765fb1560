// Times the non-matmul kernels at Qwen3-Next-80B shapes (hidden 2048; GDN Hk 16, Hv 32, Dk = Dv
// 128, conv 8192 channels; attention H 16, Hkv 2, D 256; vocabulary 151936) for every SIMD level
// this CPU has, one thread. Prints microseconds per call and the rate of the dominant work.
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/simd.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/conv.h"
#include "kernels/delta_rule.h"
#include "kernels/norm.h"
#include "kernels/select.h"

namespace {

using namespace invar;

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

double thread_cpu_us() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e6 + double(ts.tv_nsec) * 1e-3;
}

// Best of `reps` runs after one warm-up, in microseconds of this thread's CPU time (the pool has
// one thread, so all work runs here): robust when other processes share the cores.
double time_us(const std::function<void()>& fn, int reps) {
  fn();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double t0 = thread_cpu_us();
    fn();
    best = std::min(best, thread_cpu_us() - t0);
  }
  return best;
}

void bench_level(SimdLevel level) {
  simd_set(level);
  ThreadPool pool(1);
  std::printf("== simd %s\n", std::string(simd_name(level)).c_str());

  {  // RMSNorm over 64 rows of 2048
    const auto x = randn(64 * 2048, 1), w = randn(2048, 2);
    std::vector<float> y(x.size());
    const double us =
        time_us([&] { rmsnorm_rows(x.data(), w.data(), 64, 2048, 1e-6f, y.data()); }, 20);
    std::printf("rmsnorm 64x2048            %9.1f us  %6.2f GB/s\n", us,
                2.0 * 4 * x.size() / us / 1e3);
  }
  {  // Delta rule: decode (T = 1) and a 64-token chunk
    for (int64_t t : {1, 64}) {
      const DeltaRuleShape s{t, 16, 32, 128, 128, false};
      auto q = randn(size_t(t * 16 * 128), 3, 0.09f), k = randn(q.size(), 4, 0.09f);
      auto v = randn(size_t(t * 32 * 128), 5), g = randn(size_t(t * 32), 6, 0.1f);
      for (auto& x : g) x = -std::fabs(x);
      std::vector<float> beta(size_t(t * 32), 0.5f), state(32 * 128 * 128, 0.0f), o(v.size());
      const double us = time_us(
          [&] {
            delta_rule(s, state.data(), q.data(), k.data(), v.data(), g.data(), beta.data(),
                       o.data(), pool);
          },
          t == 1 ? 50 : 5);
      // 4 passes of Dv·Dk per head and token (scale, dot, update, dot): 2 flops each but scale.
      const double flops = double(t) * 32 * 128 * 128 * 7;
      std::printf("delta_rule T=%-3lld           %9.1f us  %6.2f GFLOP/s  %7.2f us/token\n",
                  (long long)t, us, flops / us / 1e3, us / double(t));
    }
  }
  {  // Causal conv over 8192 channels, 64 tokens
    const auto x = randn(64 * 8192, 7), w = randn(8192 * 4, 8);
    std::vector<float> st(3 * 8192, 0.0f), y(x.size());
    const double us =
        time_us([&] { conv1d_silu(x.data(), w.data(), st.data(), 64, 8192, 4, y.data()); }, 10);
    std::printf("conv1d_silu T=64 C=8192    %9.1f us  %7.2f us/token\n", us, us / 64);
  }
  {  // Attention: decode at context 4096, prefill of 512 tokens
    const int64_t n_pos = 4096, hkv = 2, d = 256, h = 16;
    const auto kbuf = randn(size_t(n_pos * hkv * d), 9), vbuf = randn(kbuf.size(), 10);
    const int64_t bs = 256;
    std::vector<const float*> kp, vp;
    for (int64_t b = 0; b < n_pos / bs; ++b) {
      kp.push_back(kbuf.data() + b * bs * hkv * d);
      vp.push_back(vbuf.data() + b * bs * hkv * d);
    }
    const KvView kv{kp.data(), vp.data(), bs, hkv * d};
    const auto q = randn(size_t(512 * h * d), 11);
    std::vector<float> o(q.size());
    const float scale = 1.0f / 16.0f;
    std::vector<float> scratch(size_t(attention_scratch_floats(n_pos, d, pool.size())));
    double us = time_us(
        [&] {
          attention(AttentionShape{1, n_pos - 1, h, hkv, d, scale}, kv, q.data(), o.data(), pool,
                    scratch);
        },
        10);
    double flops = 4.0 * h * d * n_pos;
    std::printf("attention decode ctx=4096  %9.1f us  %6.2f GFLOP/s\n", us, flops / us / 1e3);
    us = time_us(
        [&] {
          attention(AttentionShape{512, 0, h, hkv, d, scale}, kv, q.data(), o.data(), pool,
                    scratch);
        },
        2);
    flops = 4.0 * h * d * (512.0 * 513 / 2);
    std::printf("attention prefill T=512    %9.1f us  %6.2f GFLOP/s\n", us, flops / us / 1e3);
  }
  {  // log-softmax over the vocabulary
    const auto x = randn(151936, 12, 3.0f);
    std::vector<float> y(x.size());
    const double us = time_us([&] { log_softmax(x.data(), 151936, y.data()); }, 20);
    std::printf("log_softmax V=151936       %9.1f us\n", us);
    int32_t ids[20];
    float vals[20];
    const double us2 = time_us([&] { top_k(y.data(), 151936, 20, ids, vals); }, 20);
    std::printf("top_k 20 of 151936         %9.1f us\n", us2);
  }
}

}  // namespace

int main() {
  for (SimdLevel level : {SimdLevel::scalar, SimdLevel::avx2, SimdLevel::avx512})
    if (int(level) <= int(simd_detect())) bench_level(level);
  return 0;
}
