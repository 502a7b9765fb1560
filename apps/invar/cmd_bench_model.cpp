// `invar bench model`: forward-pass speed on a generated model next to this machine's limits.
//   prefill tok/s at several prompt lengths (one forward call, last logits only) against the
//     compute roofline  peak FMA rate ÷ (2 × active parameters per token);
//   decode tok/s (one token per call after a prompt) against the memory roofline
//     measured read bandwidth ÷ bytes of weights one decoded token reads.
// The peak FMA rate is not measured here (it needs ISA-specific code); it is taken from
// docs/machine.md (AVX-512 registers-only FMA, 216 / 425 GFLOP/s on 1 / 2 threads) and can be
// overridden with --peak-gflops. Bandwidth is measured in the bench: a canonical sum over a
// 512 MiB buffer split between the threads.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_registry.h"
#include "int_list.h"
#include "core/error.h"
#include "core/simd.h"
#include "core/thread_pool.h"
#include "kernels/reduce.h"
#include "model/make_model.h"
#include "model/model.h"

namespace invar::app {
namespace {

using Clock = std::chrono::steady_clock;

struct ModelBenchOptions {
  std::string model;  // empty: generate
  int64_t embd = 1024, layers = 8, experts = 8, vocab = 32768;
  std::string type = "f32";
  std::string prompts = "128,512,2048";
  int64_t decode = 32;
  std::string threads = "1,2";
  std::string peak = "216,425";
  std::string simd;
  bool keep = false;
};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// CPU seconds of the whole process: on a machine shared with other work, wall time measures
// the neighbours too; tokens ÷ (CPU seconds ÷ threads) is the rate the threads would reach
// if they had their cores to themselves (an estimate: waiting threads block, they do not spin).
double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

struct Timing {
  double wall = 0, cpu = 0;
  Timing& operator+=(const Timing& o) {
    wall += o.wall;
    cpu += o.cpu;
    return *this;
  }
};

// Best of 3 passes of a canonical sum over `buf`, split into 1 MiB pieces among the threads:
// GB/s by wall time and by CPU time (see cpu_seconds).
std::pair<double, double> measure_bandwidth_gbs(const std::vector<float>& buf, ThreadPool& pool) {
  const int64_t piece = 1 << 18;  // floats
  const int64_t n_pieces = int64_t(buf.size()) / piece;
  std::vector<float> sink(static_cast<size_t>(pool.size()), 0.0f);
  double best = 0, best_cpu = 0;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = Clock::now();
    const double c0 = cpu_seconds();
    pool.parallel_for(n_pieces, [&](int64_t b, int64_t e, int ti) {
      float s = 0;
      for (int64_t i = b; i < e; ++i) s += reduce_sum(buf.data() + i * piece, piece);
      sink[size_t(ti)] += s;
    });
    const double dt = seconds_since(t0), dc = (cpu_seconds() - c0) / pool.size();
    best = std::max(best, double(n_pieces * piece * 4) / dt / 1e9);
    best_cpu = std::max(best_cpu, double(n_pieces * piece * 4) / dc / 1e9);
  }
  if (sink[0] == 12345.0f) std::printf(" ");  // keep the sums alive
  return {best, best_cpu};
}

// Bytes of weights and multiply-adds per token, from the file's tensors: experts count K/NE of
// their bytes (a token visits K of NE), the embedding one row (unless it is also the output).
struct TokenCost {
  double decode_bytes = 0;  // weights read by one decoded token
  double active_params = 0; // weights one token multiplies (FLOPs = 2 × this)
};

TokenCost token_cost(const Model& m) {
  const Hparams& hp = m.hparams();
  TokenCost c;
  const double expert_frac = hp.n_expert ? double(hp.n_expert_used) / double(hp.n_expert) : 1.0;
  for (const GgufTensorInfo& t : m.gguf().tensors()) {
    if (t.ne.size() < 2 || t.name.find("nextn") != std::string::npos) continue;  // vectors, MTP
    double bytes = double(t.n_bytes), params = double(t.n_elements());
    if (t.name.find("_exps") != std::string::npos) {
      bytes *= expert_frac;
      params *= expert_frac;
    } else if (t.name == "token_embd.weight" && !hp.tied_embeddings) {
      bytes /= double(hp.n_vocab);
      params = 0;
    } else if (t.name.find("ssm_conv1d") != std::string::npos) {
      params = 0;  // a depthwise conv, not a matrix product
    }
    c.decode_bytes += bytes;
    c.active_params += params;
  }
  return c;
}

struct SeqBuffers {
  std::vector<float> state, kv, logits;
  std::vector<float*> blocks;
  ForwardScratchPtr scratch;
  SeqBuffers(const Model& m, int64_t capacity, int64_t bs) : scratch(m.scratch_make(capacity, 1)) {
    state.assign(static_cast<size_t>(m.state_floats()), 0.0f);
    const int64_t n_blocks = (capacity + bs - 1) / bs;
    kv.assign(static_cast<size_t>(n_blocks * m.kv_block_floats(bs)), 0.0f);
    for (int64_t b = 0; b < n_blocks; ++b) blocks.push_back(kv.data() + b * m.kv_block_floats(bs));
    logits.assign(static_cast<size_t>(m.hparams().n_vocab), 0.0f);
  }
};

// Runs tokens at pos0.. in one forward call.
Timing timed_forward(const Model& m, SeqBuffers& sb, const int32_t* tokens, int64_t n,
                     int64_t pos0, int64_t bs, ThreadPool& pool) {
  SeqChunk c;
  c.tokens = tokens;
  c.n_tokens = n;
  c.pos0 = pos0;
  c.state = sb.state.data();
  c.kv_blocks = sb.blocks.data();
  c.block_size = bs;
  c.logits = sb.logits.data();
  auto t0 = Clock::now();
  const double c0 = cpu_seconds();
  m.forward({&c, 1}, *sb.scratch, pool);
  return {seconds_since(t0), (cpu_seconds() - c0) / pool.size()};
}

int run_bench(const ModelBenchOptions& o) {
  const auto prompts = int_list_parse("--prompts", o.prompts);
  const auto threads = int_list_parse("--threads", o.threads);
  const auto peaks = int_list_parse("--peak-gflops", o.peak);
  if (!o.simd.empty()) {
    auto lvl = simd_parse(o.simd);
    if (!lvl) throw Error("--simd: '" + o.simd + "' is not one of off, avx2, avx512");
    simd_set(*lvl);
  }

  std::string path = o.model;
  const bool generated = path.empty();
  if (generated) {
    MakeModelConfig c;
    c.arch = Arch::qwen3next;
    c.name = "invar-bench";
    c.n_embd = o.embd;
    c.n_layer = o.layers;
    c.n_head = 8;
    c.n_head_kv = 2;
    c.head_dim = 128;
    c.n_rot = 32;
    c.n_ff = 2 * o.embd;
    c.n_expert = o.experts;
    c.n_expert_used = 2;
    c.n_ff_exp = o.embd / 2;
    c.n_ff_shexp = o.embd;
    c.ssm_state = 128;
    c.ssm_groups = 4;
    c.ssm_v_heads = 8;
    auto t = dtype_parse(o.type);
    if (!t) throw Error("--type: '" + o.type + "' is not f32, f16, bf16 or q8_0");
    c.type = *t;
    make_model_validate(c, o.vocab);
    path = (std::filesystem::temp_directory_path() /
            ("invar-bench-model-" + std::to_string(getpid()) + ".gguf"))
               .string();
    auto t0 = Clock::now();
    GgufWriter w;
    make_model(c, o.vocab, w);
    w.write(path);
    std::printf("generated %s (%.1f s)\n", path.c_str(), seconds_since(t0));
  }
  struct Cleanup {
    std::string p;
    bool on;
    ~Cleanup() {
      if (on) std::filesystem::remove(p);
    }
  } cleanup{path, generated && !o.keep};

  auto model = Model::load(path);
  const Hparams& hp = model->hparams();
  const TokenCost cost = token_cost(*model);
  std::printf("model: %s E=%lld L=%lld NE=%lld K=%lld V=%lld, %s weights, file %.0f MB\n",
              std::string(arch_name(hp.arch)).c_str(), (long long)hp.n_embd,
              (long long)hp.n_layer, (long long)hp.n_expert, (long long)hp.n_expert_used,
              (long long)hp.n_vocab, o.type.c_str(), double(model->gguf().file_size()) / 1e6);
  std::printf("per token: %.1f MB of weights read when decoding, %.1f M active params "
              "(%.2f GFLOP prefill)\nsimd: %s\n\n",
              cost.decode_bytes / 1e6, cost.active_params / 1e6, 2 * cost.active_params / 1e9,
              std::string(simd_name(simd_active())).c_str());

  const int64_t bs = 64;
  const int64_t max_prompt = *std::max_element(prompts.begin(), prompts.end());
  std::vector<int32_t> tokens(static_cast<size_t>(max_prompt + o.decode));
  uint32_t x = 12345;
  for (auto& id : tokens) {
    x = x * 1664525u + 1013904223u;
    id = int32_t((x >> 8) % uint32_t(hp.n_vocab));
  }
  std::vector<float> bw_buf(static_cast<size_t>(128) << 20, 1.0f);  // 512 MiB

  std::printf("%-8s %-14s %10s %10s %14s %9s %9s\n", "threads", "phase", "tok/s", "cpu tok/s",
              "roofline tok/s", "fraction", "cpu frac");
  auto row = [](int nt, const char* phase, double n, Timing t, double roof, double roof_cpu) {
    std::printf("%-8d %-14s %10.1f %10.1f %14.1f %8.0f%% %8.0f%%", nt, phase, n / t.wall,
                n / t.cpu, roof, 100 * n / t.wall / roof, 100 * n / t.cpu / roof_cpu);
  };
  for (size_t ti = 0; ti < threads.size(); ++ti) {
    const int nt = int(threads[ti]);
    ThreadPool pool(nt);
    const auto [bw, bw_cpu] = measure_bandwidth_gbs(bw_buf, pool);
    const double peak = double(peaks[std::min(ti, peaks.size() - 1)]);
    {  // warm-up: scratch for the largest batch, page-in of the mapping
      SeqBuffers sb(*model, max_prompt, bs);
      timed_forward(*model, sb, tokens.data(), max_prompt, 0, bs, pool);
    }
    for (int64_t p : prompts) {
      SeqBuffers sb(*model, p, bs);
      const Timing t = timed_forward(*model, sb, tokens.data(), p, 0, bs, pool);
      const double roof = peak * 1e9 / (2 * cost.active_params);
      char phase[32];
      std::snprintf(phase, sizeof phase, "prefill %lld", (long long)p);
      row(nt, phase, double(p), t, roof, roof);
      std::printf("\n");
    }
    {
      const int64_t p0 = std::min<int64_t>(128, max_prompt);
      SeqBuffers sb(*model, p0 + o.decode, bs);
      timed_forward(*model, sb, tokens.data(), p0, 0, bs, pool);
      Timing t;
      for (int64_t i = 0; i < o.decode; ++i)
        t += timed_forward(*model, sb, tokens.data() + p0 + i, 1, p0 + i, bs, pool);
      // The CPU-time fraction compares against the CPU-time bandwidth.
      row(nt, "decode", double(o.decode), t, bw * 1e9 / cost.decode_bytes,
          bw_cpu * 1e9 / cost.decode_bytes);
      std::printf("   bandwidth %.1f GB/s (cpu time: %.1f) measured\n", bw, bw_cpu);
    }
  }
  std::printf("\nprefill roofline: peak FMA %s GFLOP/s (1, 2 threads; docs/machine.md, "
              "AVX-512) / (2 x active params)\n", o.peak.c_str());
  return 0;
}

BenchKind model_bench("model", [](CLI::App& bench) -> Command::Run {
  auto o = std::make_shared<ModelBenchOptions>();
  auto* c = bench.add_subcommand(
      "model", "Prefill and decode tokens/s of a generated qwen3next next to the roofline");
  c->add_option("--model", o->model, "benchmark this GGUF instead of generating one");
  c->add_option("--embd", o->embd, "generated model: hidden size (default 1024)");
  c->add_option("--layers", o->layers, "generated model: layers (default 8)");
  c->add_option("--experts", o->experts, "generated model: experts (default 8, 2 used)");
  c->add_option("--vocab", o->vocab, "generated model: vocabulary size (default 32768)");
  c->add_option("--type", o->type, "generated model: weight type f32|f16|bf16|q8_0");
  c->add_option("--prompts", o->prompts, "prefill prompt lengths (default 128,512,2048)");
  c->add_option("--decode", o->decode, "decoded tokens after a 128-token prompt (default 32)");
  c->add_option("--threads", o->threads, "thread counts (default 1,2)");
  c->add_option("--peak-gflops", o->peak, "peak FMA GFLOP/s per thread count (default 216,425)");
  c->add_option("--simd", o->simd, "off|avx2|avx512");
  c->add_flag("--keep", o->keep, "keep the generated GGUF");
  return [o]() { return run_bench(*o); };
});

}  // namespace
}  // namespace invar::app
