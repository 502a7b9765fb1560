// `invar bench matmul`: the matrix product (kernels/matmul.h) per weight type, activation
// profile (core/activations.h: f32, or q8's integer products), SIMD level and thread count, side
// by side with OpenBLAS cblas_sgemm / cblas_sgemv on the same shapes, next to
// this machine's measured FMA peak and DRAM read bandwidth. Samples of the variants are
// interleaved (rep 1 of each, rep 2 of each, ...) so drifting machine load hits all alike.
//
// OpenBLAS is loaded with dlopen at bench time only, after OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE
// are removed from the environment (they pin its AVX2 kernel; see docs/machine.md), so the
// comparison is against its best kernel for this CPU, and no other command pays for its threads.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_machine.h"
#include "bench_registry.h"
#include "core/activations.h"
#include "core/error.h"
#include "core/simd.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "quant/blocks.h"
#include "quant/dtype.h"

namespace invar::app {
namespace {

// Wall time by default. On a shared, oversubscribed machine `--clock cpu` times with the CPU time
// of the whole process instead, divided by the thread count: the rate the threads reached while
// they actually ran (a proxy; busy-waiting threads, as OpenBLAS has, count against themselves).
bool g_cpu_clock = false;
int g_clock_threads = 1;

double clock_now() {
  if (g_cpu_clock) {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec)) / g_clock_threads;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double clock_seconds_since(double t0) {
  return clock_now() - t0;
}

// ---- OpenBLAS, loaded on demand ------------------------------------------------------------

constexpr int kCblasRowMajor = 101, kCblasNoTrans = 111, kCblasTrans = 112;

struct OpenBlas {
  using Sgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                         float, float*, int);
  using Sgemv = void (*)(int, int, int, int, float, const float*, int, const float*, int, float,
                         float*, int);
  Sgemm sgemm = nullptr;
  Sgemv sgemv = nullptr;
  void (*set_threads)(int) = nullptr;
  char* (*corename)() = nullptr;
  char* (*config)() = nullptr;
  std::string why_missing;

  bool ok() const { return sgemm && sgemv && set_threads; }
};

OpenBlas openblas_load(bool keep_env) {
  OpenBlas b;
  if (!keep_env) {
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv("OPENBLAS_L2_SIZE");
  }
  void* h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!h) h = dlopen("libopenblas.so", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    b.why_missing = std::string("dlopen libopenblas failed: ") + dlerror();
    return b;
  }
  b.sgemm = reinterpret_cast<OpenBlas::Sgemm>(dlsym(h, "cblas_sgemm"));
  b.sgemv = reinterpret_cast<OpenBlas::Sgemv>(dlsym(h, "cblas_sgemv"));
  b.set_threads = reinterpret_cast<void (*)(int)>(dlsym(h, "openblas_set_num_threads"));
  b.corename = reinterpret_cast<char* (*)()>(dlsym(h, "openblas_get_corename"));
  b.config = reinterpret_cast<char* (*)()>(dlsym(h, "openblas_get_config"));
  if (!b.ok()) b.why_missing = "libopenblas lacks cblas_sgemm/cblas_sgemv/openblas_set_num_threads";
  return b;
}

// ---- the product -----------------------------------------------------------------------------

struct Shape {
  int64_t m, n, k;
};

// Raw file-layout bytes of a random {K, N} matrix of `type`.
std::vector<uint8_t> random_weights(DType type, int64_t k, int64_t n, std::mt19937& rng) {
  std::vector<uint8_t> bytes(size_t(n * dtype_row_bytes(type, k)));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  // Block scales: normal F16 values, as real files have (none subnormal, in F16 or as weights).
  std::uniform_real_distribution<float> scale(0.005f, 0.02f);
  if (dtype_is_quantized(type) && type != DType::Q8_0) {
    for (auto& b : bytes) b = uint8_t(rng());
    const size_t block = size_t(dtype_block_bytes(type));
    for (size_t b = 0; b < bytes.size(); b += block) {
      if (type == DType::IQ1_M) iq1m_scale_set(&bytes[b], f32_to_f16(scale(rng)));
      if (type == DType::MXFP4) bytes[b] = uint8_t(120 + rng() % 8);  // 2^-8 .. 2^-1
      for (size_t off : quant_f16_offsets(type)) {
        const uint16_t d = f32_to_f16(scale(rng));
        std::memcpy(&bytes[b + size_t(off)], &d, 2);
      }
    }
    return bytes;
  }
  if (type == DType::Q8_0) {
    for (size_t b = 0; b < bytes.size(); b += kQ8BlockBytes) {
      const uint16_t d = f32_to_f16(scale(rng));
      std::memcpy(&bytes[b], &d, 2);
      for (int j = 0; j < 32; ++j) bytes[b + 2 + size_t(j)] = uint8_t(rng());
    }
    return bytes;
  }
  for (int64_t i = 0; i < k * n; ++i) {
    const float v = u(rng);
    if (type == DType::F32) {
      std::memcpy(&bytes[size_t(i) * 4], &v, 4);
    } else {
      const uint16_t h = type == DType::F16 ? f32_to_f16(v) : f32_to_bf16(v);
      std::memcpy(&bytes[size_t(i) * 2], &h, 2);
    }
  }
  return bytes;
}

struct Stats {
  double min = 0, median = 0, max = 0;
};

Stats stats_of(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  return {v.front(), v[v.size() / 2], v.back()};
}

// One column of the table: a way to compute the product, and its measured rates.
struct Variant {
  std::string name;
  std::function<void()> call;  // one product (rotating over weight copies where there are several)
  std::vector<double> rates;   // per sample: GFLOP/s
};

// Interleaved samples: per rep, one timed sample of each variant; a sample repeats the call until
// it lasts >= min_sample_s, so short products are timed over many calls.
void run_interleaved(std::vector<Variant>& vs, double flops, int reps, double min_sample_s) {
  std::vector<int> calls(vs.size(), 1);
  for (size_t i = 0; i < vs.size(); ++i) {  // warm-up and calibration
    const auto t0 = clock_now();
    vs[i].call();
    const double s = std::max(clock_seconds_since(t0), 1e-6);
    calls[i] = std::max(1, int(std::ceil(min_sample_s / s)));
  }
  for (int r = 0; r < reps; ++r) {
    for (size_t i = 0; i < vs.size(); ++i) {
      const auto t0 = clock_now();
      for (int c = 0; c < calls[i]; ++c) vs[i].call();
      vs[i].rates.push_back(flops * calls[i] / clock_seconds_since(t0) / 1e9);
    }
  }
}

std::string fmt_stats(const Stats& s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%6.1f %6.1f %6.1f", s.min, s.median, s.max);
  return buf;
}

struct Options {
  std::vector<int> threads{1, 2};
  std::vector<std::string> dtypes{"f32", "f16", "bf16", "q8_0"};
  std::vector<std::string> activations{"f32"};  // profiles, each a row per shape, type, threads
  std::vector<std::string> simd;                // levels to time; empty: every one from AVX2 up
  int reps = 7;
  double min_sample_ms = 20;
  int64_t cold_mib = 320;  // M <= 16: weights rotate over copies totalling this much (> the LLC)
  bool cold_all = false;   // every M rotates, as a forward pass meets its weights (prefill too)
  bool keep_openblas_env = false;
  bool quick = false;
  std::string clock = "wall";
  std::vector<std::string> shapes;  // "MxNxK" each; empty: the default set
};

Shape shape_parse(const std::string& s) {
  long long m = 0, n = 0, k = 0;
  char end = 0;
  if (std::sscanf(s.c_str(), "%lldx%lldx%lld%c", &m, &n, &k, &end) != 3 || m < 1 || n < 1 ||
      k < 1) {
    throw Error("--shapes entries are MxNxK with positive integers (got '" + s + "')");
  }
  return {m, n, k};
}

int run_bench(const Options& opt) {
  const OpenBlas blas = openblas_load(opt.keep_openblas_env);
  std::vector<SimdLevel> levels;
  for (SimdLevel l : {SimdLevel::avx2, SimdLevel::avx512}) {
    const bool asked = opt.simd.empty() || std::find(opt.simd.begin(), opt.simd.end(),
                                                     std::string(simd_name(l))) != opt.simd.end();
    if (asked && int(l) <= int(simd_detect())) levels.push_back(l);
  }
  for (const std::string& name : opt.simd) {
    const auto l = simd_parse(name);
    if (!l || *l == SimdLevel::scalar)
      throw Error("--simd entries are avx2 or avx512, not '" + name + "'");
    if (int(*l) > int(simd_detect())) throw Error("--simd " + name + ": this CPU lacks it");
  }
  if (levels.empty()) throw Error("bench matmul needs at least AVX2 (this CPU has none)");
  const SimdLevel saved_level = simd_active();
  std::vector<ActivationProfile> profiles;
  for (const std::string& name : opt.activations) {
    const auto a = activations_parse(name);
    if (!a) throw Error("--activations entries are f32 or q8, not '" + name + "'");
    profiles.push_back(*a);
  }
  if (profiles.empty()) throw Error("--activations: at least one profile");
  const ActivationProfile saved_profile = activations_active();

  std::printf(
      "invar bench matmul: y[M][N] = x[M][K] · Wᵀ, activations F32 (act f32) or quantised to 8 "
      "bits (act q8: Q4_K/Q5_K/Q6_K/Q8_0 only, other types as f32); GFLOP/s min/median/max over "
      "%d interleaved samples, %s clock\n",
      opt.reps, g_cpu_clock ? "CPU-time (process CPU seconds / threads)" : "wall");
  if (blas.ok()) {
    std::printf("OpenBLAS kernel: %s (%s)%s\n", blas.corename ? blas.corename() : "?",
                blas.config ? blas.config() : "?",
                opt.keep_openblas_env ? ", OPENBLAS_CORETYPE kept from the environment"
                                      : ", OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset");
  } else {
    std::printf("OpenBLAS: not compared (%s)\n", blas.why_missing.c_str());
  }

  // Machine limits per thread count.
  // 64 / 256 MiB in ordinary pages, as the bench's matrices are.
  auto bw_buf = std::make_unique<ProbeBuffer>(size_t(opt.quick ? 64 : 256) << 18, false);
  std::printf("\n%-8s %-22s %-22s %-18s\n", "threads", "FMA peak avx2 GFLOP/s",
              "FMA peak avx512 GFLOP/s", "DRAM read GB/s");
  std::map<int, double> bandwidth;
  for (int t : opt.threads) {
    ThreadPool pool(t);
    g_clock_threads = t;
    const double peak2 = fma_peak_gflops(SimdLevel::avx2, pool, clock_now);
    const double peak512 = simd_detect() == SimdLevel::avx512
                               ? fma_peak_gflops(SimdLevel::avx512, pool, clock_now)
                               : 0.0;
    bandwidth[t] = read_bandwidth_gbs(*bw_buf, pool, clock_now);
    std::printf("%-8d %-22.0f %-22.0f %-18.1f\n", t, peak2, peak512, bandwidth[t]);
  }
  bw_buf.reset();

  std::vector<Shape> shapes{
      {1, 4096, 1024}, {64, 4096, 1024}, {512, 4096, 1024}, {1024, 1024, 1024}};
  if (opt.quick) shapes = {{1, 4096, 1024}, {64, 4096, 1024}};
  if (!opt.shapes.empty()) {
    shapes.clear();
    for (const std::string& s : opt.shapes) shapes.push_back(shape_parse(s));
  }
  std::mt19937 rng(42);
  std::printf("\n%-16s %-5s %-3s %-3s | %-20s | %-20s | %-20s | %-6s | %s\n", "M×N×K", "type",
              "act", "thr", "invar avx2", "invar avx512", "OpenBLAS (F32)", "best/OB",
              "M<=16: GB/s median (DRAM)");

  for (const Shape& s : shapes) {
    const double flops = 2.0 * double(s.m) * double(s.n) * double(s.k);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> x(size_t(s.m * s.k)), y(size_t(s.m * s.n)), y_ob(size_t(s.m * s.n));
    for (auto& v : x) v = u(rng);
    for (const std::string& tname : opt.dtypes) {
      const auto type = dtype_parse(tname);
      if (!type) throw Error("unknown --dtypes entry '" + tname + "'");
      const std::vector<uint8_t> raw = random_weights(*type, s.k, s.n, rng);
      const int64_t weight_bytes = int64_t(raw.size());
      // Decode reads weights from DRAM: rotate over enough copies to defeat the caches (and
      // prefill too with --cold: a forward pass meets each layer's weights out of cache).
      const int64_t copies =
          s.m <= 16 || opt.cold_all ? std::max<int64_t>(1, (opt.cold_mib << 20) / weight_bytes) : 1;
      // Matrices are read in place: each needs bytes of its own to stay out of cache.
      std::vector<std::vector<uint8_t>> raws(size_t(copies), raw);
      std::vector<Matrix> ws;
      for (int64_t c = 0; c < copies; ++c) ws.emplace_back(*type, s.k, s.n, raws[size_t(c)].data());
      // OpenBLAS multiplies the same weights, dequantised to F32 (compared on F32 rows only).
      std::vector<std::vector<float>> wf;
      if (*type == DType::F32 && blas.ok()) {
        for (int64_t c = 0; c < copies; ++c) {
          wf.emplace_back(size_t(s.n * s.k));
          for (int64_t j = 0; j < s.n; ++j) ws[0].row_to_f32(j, &wf.back()[size_t(j * s.k)]);
        }
      }
      for (int t : opt.threads) {
        ThreadPool pool(t);
        g_clock_threads = t;
        if (blas.ok()) blas.set_threads(t);
        std::vector<float> scratch(size_t(matmul_scratch_floats(t)));
        // Every profile's variants in one interleaved run: profile a's levels at [a·L, a·L + L).
        std::vector<Variant> vs;
        size_t rot = 0;
        for (ActivationProfile a : profiles) {
          for (SimdLevel level : levels) {
            vs.push_back({std::string(simd_name(level)),
                          [&, level, a] {
                            activations_set(a);
                            simd_set(level);
                            matmul(ws[rot++ % ws.size()], x.data(), s.m, y.data(), pool, scratch);
                          },
                          {}});
          }
        }
        if (!wf.empty()) {
          vs.push_back({"openblas",
                        [&] {
                          const float* w = wf[rot++ % wf.size()].data();
                          if (s.m == 1) {
                            blas.sgemv(kCblasRowMajor, kCblasNoTrans, int(s.n), int(s.k), 1.0f, w,
                                       int(s.k), x.data(), 1, 0.0f, y_ob.data(), 1);
                          } else {
                            blas.sgemm(kCblasRowMajor, kCblasNoTrans, kCblasTrans, int(s.m),
                                       int(s.n), int(s.k), 1.0f, x.data(), int(s.k), w, int(s.k),
                                       0.0f, y_ob.data(), int(s.n));
                          }
                        },
                        {}});
        }
        run_interleaved(vs, flops, opt.reps, opt.min_sample_ms / 1e3);
        simd_set(saved_level);
        activations_set(saved_profile);

        double ob = 0;  // median of OpenBLAS
        if (!wf.empty()) ob = stats_of(vs.back().rates).median;
        for (size_t ai = 0; ai < profiles.size(); ++ai) {
          std::string cols[3] = {"-", "-", "-"};
          cols[2] = wf.empty() || ai > 0 ? "-" : fmt_stats(stats_of(vs.back().rates));
          double best = 0;  // median of the best invar level
          for (size_t li = 0; li < levels.size(); ++li) {
            const Variant& v = vs[ai * levels.size() + li];
            const Stats st = stats_of(v.rates);
            cols[v.name == "avx2" ? 0 : 1] = fmt_stats(st);
            best = std::max(best, st.median);
          }
          char shape_s[48], ratio[16] = "-", gbs[96] = "";
          std::snprintf(shape_s, sizeof shape_s, "%lld×%lld×%lld", (long long)s.m, (long long)s.n,
                        (long long)s.k);
          if (ob > 0) std::snprintf(ratio, sizeof ratio, "%.2f", best / ob);
          if (s.m <= 16) {
            // Weight bytes streamed per second: bytes per product × products per second.
            const double invar_gbs = double(weight_bytes) * best / flops;
            const double ob_gbs = double(s.n * s.k * 4) * ob / flops;
            if (ob > 0) {
              std::snprintf(gbs, sizeof gbs, "invar %.1f, OpenBLAS %.1f (DRAM %.1f)", invar_gbs,
                            ob_gbs, bandwidth[t]);
            } else {
              std::snprintf(gbs, sizeof gbs, "invar %.1f (DRAM %.1f)", invar_gbs, bandwidth[t]);
            }
          }
          const std::string act(activations_name(profiles[ai]));
          std::printf("%-16s %-5s %-3s %-3d | %-20s | %-20s | %-20s | %-7s | %s\n", shape_s,
                      tname.c_str(), act.c_str(), t, cols[0].c_str(), cols[1].c_str(),
                      cols[2].c_str(), ratio, gbs);
          // The ISAs must agree to the bit (a cheap reminder that this is the same product).
          if (simd_detect() == SimdLevel::avx512) {
            std::vector<float> a(y.size()), b(y.size());
            activations_set(profiles[ai]);
            simd_set(SimdLevel::avx2);
            matmul(ws[0], x.data(), s.m, a.data(), pool);
            simd_set(SimdLevel::avx512);
            matmul(ws[0], x.data(), s.m, b.data(), pool);
            simd_set(saved_level);
            activations_set(saved_profile);
            if (std::memcmp(a.data(), b.data(), a.size() * 4) != 0) {
              std::printf("  !! avx2 and avx512 results differ: a bug in the canonical order\n");
            }
          }
        }
      }
      std::fflush(stdout);
    }
  }
  std::printf(
      "\nPeaks and bandwidth are measured above; best/OB = best invar median / OpenBLAS "
      "median (F32 rows). M<=16 GB/s counts the weight bytes read per product (the file's bytes "
      "for\n"
      "quantised types, read in place). Quantised types follow their own canonical order\n"
      "(docs/numerics.md). On a machine shared with other work the numbers are indicative.\n");
  return 0;
}

BenchKind bench_matmul("matmul", [](CLI::App& bench) -> Command::Run {
  auto opt = std::make_shared<Options>();
  auto* sub =
      bench.add_subcommand("matmul", "Matrix product vs OpenBLAS sgemm, FMA peak, bandwidth");
  sub->add_option("--threads", opt->threads, "thread counts to run (default 1 2)")->delimiter(',');
  sub->add_option("--dtypes", opt->dtypes,
                  "weight types (default f32 f16 bf16 q8_0; any of f32 f16 bf16 q4_0 q4_1 q5_0 "
                  "q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K iq2_xxs iq2_xs iq3_xxs iq1_s iq4_nl iq3_s "
                  "iq2_s iq4_xs iq1_m tq1_0 tq2_0 mxfp4)")
      ->delimiter(',');
  sub->add_option("--activations", opt->activations,
                  "activation profiles, each timed in the same interleaved run (default f32; q8: "
                  "8-bit activations, integer products for q4_K q5_K q6_K q8_0 weights)")
      ->delimiter(',');
  sub->add_option("--simd", opt->simd,
                  "SIMD levels to time, avx2 and/or avx512 (default: every one this CPU has)")
      ->delimiter(',');
  sub->add_option("--reps", opt->reps, "interleaved samples per variant (default 7)");
  sub->add_option("--sample-ms", opt->min_sample_ms, "minimum duration of one sample (default 20)");
  sub->add_option("--cold-mib", opt->cold_mib,
                  "M <= 16: rotate over weight copies totalling this many MiB (default 320)");
  sub->add_flag("--cold", opt->cold_all,
                "every M rotates over the weight copies of --cold-mib (prefill as a forward pass "
                "meets its weights: out of cache)");
  sub->add_flag(
      "--keep-openblas-env", opt->keep_openblas_env,
      "keep OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE (default: unset them for the best kernel)");
  sub->add_option("--clock", opt->clock,
                  "wall (default) or cpu: process CPU time / threads, for a busy shared machine")
      ->check(CLI::IsMember({"wall", "cpu"}));
  sub->add_option("--shapes", opt->shapes,
                  "products to time as MxNxK (M activation rows, N outputs, K inputs), e.g. "
                  "160x512x2048 for an expert's gate, instead of the default set (M <= 16: "
                  "weights rotate over copies, GB/s reported)")
      ->delimiter(',');
  sub->add_flag("--quick", opt->quick, "two shapes, smaller buffers (a smoke run)");
  return [opt] {
    for (int t : opt->threads) {
      if (t < 1) throw Error("--threads entries must be >= 1 (got " + std::to_string(t) + ")");
    }
    if (opt->reps < 1) throw Error("--reps must be at least 1");
    g_cpu_clock = opt->clock == "cpu";
    return run_bench(*opt);
  };
});

}  // namespace
}  // namespace invar::app
