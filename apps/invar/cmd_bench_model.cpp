// `invar bench model`: forward-pass speed on a generated (or given) model next to this machine's
// limits, both measured in the same run, at the same thread count and SIMD level:
//   prefill tok/s at several prompt lengths (one forward call, logits of the last position only)
//     against the compute roofline  FMA peak ÷ FLOPs per prompt token;
//   decode tok/s (one token per call after a prompt) against the memory roofline
//     read bandwidth ÷ bytes one decoded token reads.
// The costs are the model's real work (ModelWork): matrix products over the active parameters
// (MoE: the K routed experts and the shared expert, not all NE), the output projection once per
// prompt in prefill but once per token in decode, attention over the causal history, the delta
// rule and the conv; decode also reads the recurrent state and writes it back, and reads the KV
// history. The FMA peak (register-only FMA chains on the active SIMD level) is measured before
// and after each thread count's runs; the best of the two is the limit. The read bandwidth
// (repeated sums over a buffer of one decoded token's bytes: DRAM for a large model, the caches
// for a small one) swings with the machine's other load by more than the decode rate does
// between rounds, so it is measured before the first round and after every round's decode, and
// the best of those probes is the limit (their spread is printed): the decode rate is the best
// of its rounds too, and other load only ever lowers a probe (a median let the best decode round
// read above a limit it had reached). A rate above its roofline
// means an input is wrong, so the bench stops with an error that names it instead of printing a
// fraction > 100%.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench_clock.h"
#include "bench_machine.h"
#include "bench_peer.h"
#include "bench_registry.h"
#include "bench_vision.h"
#include "core/activations.h"
#include "core/error.h"
#include "core/simd.h"
#include "core/thread_pool.h"
#include "forge/make_model.h"
#include "int_list.h"
#include "model/model.h"
#include "quant/quantize.h"

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
  std::string simd;
  std::string activations = "f32";  // profiles to run, each measure of every one in turn
  bool keep = false;
  bool huge_pages = false;  // weights copied into 2 MiB pages (Model::load)
  std::string peer;         // "llama-bench=PATH": run llama.cpp's llama-bench between invar's runs
  int64_t repeat = 1;       // rounds of the runs; each rate is the best round's
  // --image IMG --mmproj F: the image-encode table of `bench vision` after the model's, with
  // llama-mtmd-cli (beside --peer's llama-bench, or --peer-mtmd) on --model as its text model.
  std::string image, mmproj, peer_mtmd;
};

// Progress of the slow steps, on stderr (flushed: it may be a pipe).
template <class... A>
void progress(const char* fmt, A... a) {
  std::fprintf(stderr, "bench model: ");
  std::fprintf(stderr, fmt, a...);
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

// CPU seconds of the whole process: on a machine shared with other work, wall time measures
// the neighbours too; tokens ÷ (CPU seconds ÷ threads) is the rate the threads would reach
// if they had their cores to themselves (an estimate: waiting threads block, they do not spin).
// The two clocks of the machine limits: wall seconds, and CPU seconds per pool thread.
int g_threads = 1;
double cpu_now() {
  return cpu_seconds() / g_threads;
}

struct Timing {
  double wall = 0, cpu = 0;
  Timing& operator+=(const Timing& o) {
    wall += o.wall;
    cpu += o.cpu;
    return *this;
  }
};

// A machine limit by both clocks.
struct Limit {
  double wall = 0, cpu = 0;
  void keep_best(const Limit& o) {
    wall = std::max(wall, o.wall);
    cpu = std::max(cpu, o.cpu);
  }
};

struct MachineLimits {
  Limit fma_gflops, read_gbs;
};

Limit measure_fma_peak(SimdLevel level, ThreadPool& pool) {
  progress("%d thread(s): measuring the %s FMA peak", pool.size(),
           std::string(simd_name(level)).c_str());
  g_threads = pool.size();
  return {fma_peak_gflops(level, pool, wall_seconds), fma_peak_gflops(level, pool, cpu_now)};
}

Limit measure_read_bandwidth(const ProbeBuffer& buf, ThreadPool& pool) {
  progress("%d thread(s): measuring the read bandwidth", pool.size());
  g_threads = pool.size();
  return {read_bandwidth_gbs(buf, pool, wall_seconds), read_bandwidth_gbs(buf, pool, cpu_now)};
}

// The read bandwidth probes of one thread count, one before the first round and one after each
// round's decode: their median by each clock is the limit.
struct BandwidthProbes {
  std::vector<double> wall, cpu;
  void add(const Limit& l) {
    wall.push_back(l.wall);
    cpu.push_back(l.cpu);
  }
  static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  }
  double median_wall() const { return median(wall); }
  Limit limit() const {
    return {*std::max_element(wall.begin(), wall.end()), *std::max_element(cpu.begin(), cpu.end())};
  }
  double best_wall() const { return *std::max_element(wall.begin(), wall.end()); }
  double spread_wall() const { return best_wall() - *std::min_element(wall.begin(), wall.end()); }
};

// What the forward pass computes and reads, from the file's tensors and the hyperparameters.
struct ModelWork {
  double active_params = 0;  // matrix weights one token multiplies, output projection aside
  double active_bytes = 0;   // their bytes (plus the depthwise conv weights and the vectors)
  double output_params = 0;  // the output projection {E, V}
  double output_bytes = 0;
  double embd_row_bytes = 0;      // one token_embd row (0 when tied: counted as the output)
  double recurrent_flops = 0;     // per token: delta rule and conv of every recurrent layer
  double state_bytes = 0;         // per token: recurrent state read and written back
  double attn_flops_per_key = 0;  // per (query, history position): q·k and the weighted V sum
  double kv_bytes_per_key = 0;    // per history position read by one query: K and V rows

  // FLOPs of one prompt of p tokens from position 0 (logits of its last position only).
  double prefill_flops(int64_t p) const {
    const double pairs = double(p) * double(p + 1) / 2;
    return double(p) * (2 * active_params + recurrent_flops) + 2 * output_params +
           attn_flops_per_key * pairs;
  }
  // Bytes read to decode the token at position pos.
  double decode_bytes(int64_t pos) const {
    return active_bytes + output_bytes + embd_row_bytes + state_bytes +
           kv_bytes_per_key * double(pos + 1);
  }
};

// The trunk layer of a "blk.N." tensor name, or −1.
int64_t layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  return std::stoll(name.substr(4));
}

ModelWork model_work(const Model& m) {
  const Hparams& hp = m.hparams();
  ModelWork w;
  const double expert_frac = hp.n_expert ? double(hp.n_expert_used) / double(hp.n_expert) : 1.0;
  for (const GgufTensorInfo& t : m.gguf().tensors()) {
    if (layer_of(t.name) >= hp.n_layer) continue;  // MTP blocks: not run by a plain decode
    const double bytes = double(t.n_bytes), params = double(t.n_elements());
    if (t.ne.size() < 2) {  // norm weights, gate biases, A: read by every token, no matmul
      w.active_bytes += bytes;
      continue;
    }
    const bool output =
        t.name == "output.weight" || (t.name == "token_embd.weight" && hp.tied_embeddings);
    if (output) {
      w.output_bytes += bytes;
      w.output_params += params;
    } else if (t.name == "token_embd.weight") {
      w.embd_row_bytes += bytes / double(hp.n_vocab);
    } else if (t.name.find("_exps") != std::string::npos) {  // a token visits K of NE experts
      w.active_bytes += bytes * expert_frac;
      w.active_params += params * expert_frac;
    } else if (t.name.find("ssm_conv1d") != std::string::npos) {
      w.active_bytes += bytes;  // a depthwise conv, counted in recurrent_flops
    } else {
      w.active_bytes += bytes;
      w.active_params += params;
    }
  }
  const double n_rec = double(hp.n_recurrent_layers()), n_attn = double(hp.n_attention_layers());
  const double state = double(hp.ssm_dt_rank) * double(hp.ssm_d_state) * double(hp.ssm_d_state);
  // Per state element: decay (1), dot with k (2), update (2), dot with q (2); conv: Kc FMAs a
  // channel.
  w.recurrent_flops = n_rec * (7 * state + 2 * double(hp.ssm_d_conv * hp.gdn_conv_channels()));
  w.state_bytes = 2 * 4 * double(m.state_floats());
  w.attn_flops_per_key = n_attn * 4 * double(hp.n_head * hp.head_dim);
  w.kv_bytes_per_key = n_attn * 2 * 4 * double(hp.n_head_kv * hp.head_dim);
  return w;
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
Timing timed_forward(const Model& m, SeqBuffers& sb, const int32_t* tokens, int64_t n, int64_t pos0,
                     int64_t bs, ThreadPool& pool) {
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

// Fraction of a roofline. A rate above it means the roofline's own measure (the FMA peak, the
// read bandwidth) came out low, as it does while other work loads the machine: the figure is
// kept and flagged on stderr, not made an error (a measure of time must not fail a run).
double checked_fraction(double rate, double roof, const std::string& what, const std::string& why) {
  const double f = rate / roof;
  if (!(f <= 1.0))
    std::fprintf(stderr,
                 "warning: %s ran at %.0f%% of its roofline (%.1f tok/s against %.1f): %s\n",
                 what.c_str(), 100 * f, rate, roof, why.c_str());
  return f;
}

// One line of the peer table: a measure at a thread count, best tokens/s of each side.
struct PeerRow {
  std::string measure;
  double peer = 0, invar = 0;
};

void print_peer_table(const std::string& file, const std::vector<PeerRow>& rows) {
  std::printf(
      "\n| file | measure | llama.cpp | invar | invar / llama.cpp |\n|---|---|---|---|---|\n");
  for (const PeerRow& r : rows)
    std::printf("| %s | %s | %.1f | %.1f | %.2f |\n", file.c_str(), r.measure.c_str(), r.peer,
                r.invar, r.invar / r.peer);
  std::printf(
      "llama.cpp: llama-bench -o json -r 1 on the same file and threads, run right after "
      "invar's run of the same measure; best of the rounds for both.\n");
}

// The image-encode table for --image, on the same thread counts as the model's.
int image_bench_run(const ModelBenchOptions& o) {
  VisionBenchArgs v;
  v.mmproj = o.mmproj;
  v.image = o.image;
  v.threads = o.threads;
  v.peer = o.peer_mtmd;
  if (v.peer.empty() && !o.peer.empty() && !o.model.empty()) {
    // llama.cpp builds llama-mtmd-cli beside llama-bench.
    const std::optional<BenchPeer> bench = bench_peer_parse(o.peer);
    const auto sibling = std::filesystem::path(bench->path).parent_path() / "llama-mtmd-cli";
    if (std::filesystem::exists(sibling)) v.peer = "llama-mtmd-cli=" + sibling.string();
  }
  if (!v.peer.empty()) {
    if (o.model.empty())
      throw Error(
          "--image with a llama.cpp peer needs --model TEXT.gguf: llama-mtmd-cli loads "
          "the text model the mmproj belongs to");
    v.peer_model = o.model;
  }
  std::printf("\nimage encode (invar bench vision):\n");
  return vision_bench_run(v);
}

int run_bench(const ModelBenchOptions& o) {
  if (o.image.empty() != o.mmproj.empty()) throw Error("--image and --mmproj go together");
  const std::optional<BenchPeer> peer = bench_peer_parse(o.peer);
  if (peer && o.model.empty())
    throw Error("--peer needs --model FILE: a generated model has no vocabulary for llama.cpp");
  if (o.repeat < 1) throw Error("--repeat: at least 1 round");
  const auto prompts = int_list_parse("--prompts", o.prompts);
  const auto threads = int_list_parse("--threads", o.threads);
  if (!o.simd.empty()) {
    auto lvl = simd_parse(o.simd);
    if (!lvl) throw Error("--simd: '" + o.simd + "' is not one of off, avx2, avx512");
    simd_set(*lvl);
  }
  std::vector<ActivationProfile> profiles;
  {
    std::stringstream ss(o.activations);
    std::string item;
    while (std::getline(ss, item, ',')) {
      const auto p = activations_parse(item);
      if (!p) throw Error("--activations: '" + item + "' is not one of f32, q8");
      profiles.push_back(*p);
    }
    if (profiles.empty()) throw Error("--activations: empty list");
  }
  // The phase's name carries the profile where more than one runs.
  const auto profile_tag = [&](ActivationProfile a) {
    return profiles.size() > 1 ? " " + std::string(activations_name(a)) : std::string();
  };
  if (o.decode < 1) throw Error("--decode: at least 1 token");
  const SimdLevel level = simd_active();
  const std::string simd = std::string(simd_name(level));

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
    if (!t) throw Error("--type: '" + o.type + "' is not one of " + quantize_supported_list());
    c.type = *t;
    make_model_validate(c, o.vocab);
    path = (std::filesystem::temp_directory_path() /
            ("invar-bench-model-" + std::to_string(getpid()) + ".gguf"))
               .string();
    progress("generating the model");
    auto t0 = Clock::now();
    GgufWriter w;
    make_model(c, o.vocab, w);
    w.write(path);
    std::printf("generated %s (%.1f s)\n", path.c_str(), seconds_since(t0));
    std::fflush(stdout);
  }
  struct Cleanup {
    std::string p;
    bool on;
    ~Cleanup() {
      if (on) std::filesystem::remove(p);
    }
  } cleanup{path, generated && !o.keep};

  progress("loading %s", path.c_str());
  auto model = Model::load(path, /*populate_now=*/true, o.huge_pages);
  const Hparams& hp = model->hparams();
  const ModelWork work = model_work(*model);
  // Weight types as the file has them ("q4_K ×69, q6_K ×13, f32 ×…"), not the generator's flag.
  std::map<std::string, int> type_count;
  for (const auto& t : model->gguf().tensors()) ++type_count[std::string(dtype_name(t.type))];
  std::string types;
  for (const auto& [name, count] : type_count)
    types += (types.empty() ? "" : ", ") + name + " x" + std::to_string(count);
  std::printf(
      "model: %s E=%lld L=%lld (%lld attention) NE=%lld K=%lld V=%lld, tensors %s, "
      "file %.0f MB, %s\n",
      std::string(arch_name(hp.arch)).c_str(), (long long)hp.n_embd, (long long)hp.n_layer,
      (long long)hp.n_attention_layers(), (long long)hp.n_expert, (long long)hp.n_expert_used,
      (long long)hp.n_vocab, types.c_str(), double(model->gguf().file_size()) / 1e6,
      // The file's mapping is PMD-mapped only where the page cache holds 2 MiB folios, which
      // varies from run to run: prefill rates vary with it (--huge-pages removes that).
      o.huge_pages ? "weights copied into 2 MiB pages" : "weights read from the file mapping");
  std::printf(
      "per token: %.1f M active params (K of NE experts + shared expert), output "
      "projection %.1f M (prefill: once per prompt; decode: every token)\n",
      work.active_params / 1e6, work.output_params / 1e6);
  std::printf("simd: %s, activations: %s\n", simd.c_str(), o.activations.c_str());
  std::fflush(stdout);

  const int64_t bs = 64;
  const int64_t max_prompt = *std::max_element(prompts.begin(), prompts.end());
  const int64_t p0 = std::min<int64_t>(128, max_prompt);
  std::vector<int32_t> tokens(static_cast<size_t>(std::max(max_prompt, p0 + o.decode)));
  uint32_t x = 12345;
  for (auto& id : tokens) {
    x = x * 1664525u + 1013904223u;
    id = int32_t((x >> 8) % uint32_t(hp.n_vocab));
  }
  double decode_bytes = 0;  // mean over the decoded positions
  for (int64_t i = 0; i < o.decode; ++i) decode_bytes += work.decode_bytes(p0 + i) / o.decode;
  std::printf(
      "decode bytes per token: %.1f MB = trunk weights %.1f (K of NE experts, shared expert, "
      "norms) + output projection %.1f + embedding row %.3f + recurrent state read and written "
      "%.1f + KV history %.1f (mean over the decoded positions)\n",
      decode_bytes / 1e6, work.active_bytes / 1e6, work.output_bytes / 1e6,
      work.embd_row_bytes / 1e6, work.state_bytes / 1e6,
      (decode_bytes - work.decode_bytes(-1)) / 1e6);
  // The bandwidth that bounds decode is that of reading its bytes over and over: DRAM for a
  // model far larger than the caches, the caches' for a small one. Read through the pages the
  // weights are in (--huge-pages): the page size alone moves the rate.
  const ProbeBuffer bw_buf(size_t(std::max(decode_bytes / 4, double(1 << 18))), o.huge_pages);

  std::vector<PeerRow> peer_rows;
  for (int64_t nt64 : threads) {
    const int nt = int(nt64);
    ThreadPool pool(nt);
    MachineLimits lim;
    lim.fma_gflops = measure_fma_peak(level, pool);
    BandwidthProbes bandwidth;
    bandwidth.add(measure_read_bandwidth(bw_buf, pool));
    struct Row {
      std::string phase, work;
      double n;
      Timing t;
      double flops_or_bytes;
      bool decode;
      bool int8 = false;  // q8 prefill: integer products, which the FMA peak does not bound
    };
    std::vector<Row> rows;
    progress("%d thread(s): warm-up (prefill %lld)", nt, (long long)max_prompt);
    // One set of buffers for the warm-up and every timed prompt, as a serving process keeps its
    // working memory (ModelRunner) and llama-bench its context: the warm-up faults in the
    // scratch's fresh zero pages and pages in the mapping, so the timed calls measure the
    // forward pass, not first-touch page faults (10-15% of a 512-token prefill on this VM when
    // each prompt had buffers of its own). Each prompt starts from zeroed recurrent state and KV;
    // the logits equal those of fresh buffers bit for bit.
    SeqBuffers prefill_sb(*model, max_prompt, bs);
    timed_forward(*model, prefill_sb, tokens.data(), max_prompt, 0, bs, pool);
    // Rows in order: the prompts, then decode; each keeps its fastest round, invar's and the
    // peer's alike.
    const size_t row0 = peer_rows.size();
    const auto keep_best = [&](size_t i, const Row& r, double peer_rate) {
      if (rows.size() <= i)
        rows.push_back(r);
      else if (r.t.wall < rows[i].t.wall)
        rows[i] = r;
      if (!peer) return;
      if (peer_rows.size() <= row0 + i)
        peer_rows.push_back({r.phase + " tok/s, " + std::to_string(nt) + " thread(s)", 0, 0});
      PeerRow& pr = peer_rows[row0 + i];
      pr.peer = std::max(pr.peer, peer_rate);
      pr.invar = std::max(pr.invar, r.n / r.t.wall);
    };
    const auto peer_run = [&](const char* what, PeerTest t) {
      if (!peer) return 0.0;
      t.threads = nt;
      progress("%d thread(s): llama-bench %s", nt, what);
      return bench_peer_run(*peer, path, t);
    };
    for (int64_t round = 0; round < o.repeat; ++round) {
      size_t i = 0;
      for (int64_t p : prompts) {
        const double flops = work.prefill_flops(p) / double(p);
        char w[32];
        std::snprintf(w, sizeof w, "%.3f GFLOP", flops / 1e9);
        std::vector<Row> runs;
        for (ActivationProfile a : profiles) {
          activations_set(a);
          progress("%d thread(s): prefill %lld%s", nt, (long long)p, profile_tag(a).c_str());
          std::fill(prefill_sb.state.begin(), prefill_sb.state.end(), 0.0f);
          std::fill(prefill_sb.kv.begin(), prefill_sb.kv.end(), 0.0f);
          const Timing t = timed_forward(*model, prefill_sb, tokens.data(), p, 0, bs, pool);
          runs.push_back({"prefill " + std::to_string(p) + profile_tag(a), w, double(p), t, flops,
                          false, a == ActivationProfile::q8});
        }
        const double peer_rate = peer_run("prefill", {p, 0, 0, nt});
        for (const Row& r : runs) keep_best(i++, r, peer_rate);
      }
      char w[32];
      std::snprintf(w, sizeof w, "%.1f MB", decode_bytes / 1e6);
      std::vector<Row> runs;
      for (ActivationProfile a : profiles) {
        activations_set(a);
        progress("%d thread(s): decode %lld tokens after a %lld-token prompt%s", nt,
                 (long long)o.decode, (long long)p0, profile_tag(a).c_str());
        SeqBuffers sb(*model, p0 + o.decode, bs);
        timed_forward(*model, sb, tokens.data(), p0, 0, bs, pool);
        Timing t;
        for (int64_t k = 0; k < o.decode; ++k)
          t += timed_forward(*model, sb, tokens.data() + p0 + k, 1, p0 + k, bs, pool);
        runs.push_back({"decode" + profile_tag(a), w, double(o.decode), t, decode_bytes, true});
      }
      bandwidth.add(measure_read_bandwidth(bw_buf, pool));
      const double peer_rate = peer_run("decode", {0, o.decode, p0, nt});
      for (const Row& r : runs) keep_best(i++, r, peer_rate);
    }
    lim.fma_gflops.keep_best(measure_fma_peak(level, pool));
    lim.read_gbs = bandwidth.limit();

    std::printf(
        "\n%d thread(s), %s. Limits measured in this run, wall / CPU-time clock:\n"
        "  FMA peak  %.0f / %.0f GFLOP/s  (register-only %s FMA chains, %d thread(s); best of "
        "before and after the runs)\n"
        "  read bandwidth  %.1f / %.1f GB/s  (repeated sums over a %.1f MB buffer in %s pages, "
        "the bytes of one decoded token, %d thread(s); best of %zu probes, before the first "
        "round and after each decode; wall median %.1f, spread %.1f GB/s)\n",
        nt, simd.c_str(), lim.fma_gflops.wall, lim.fma_gflops.cpu, simd.c_str(), nt,
        lim.read_gbs.wall, lim.read_gbs.cpu, double(bw_buf.size()) * 4 / 1e6,
        bw_buf.huge() ? "2 MiB" : "4 KiB", nt, bandwidth.wall.size(), bandwidth.median_wall(),
        bandwidth.spread_wall());
    std::printf("%-8s %-13s %-13s %10s %10s %7s %10s %10s %7s\n", "threads", "phase", "work/token",
                "tok/s", "roofline", "of roof", "cpu tok/s", "cpu roof", "of roof");
    for (const Row& r : rows) {
      // Compute roofline: GFLOP/s ÷ FLOPs per token; memory roofline: GB/s ÷ bytes per token.
      const Limit& l = r.decode ? lim.read_gbs : lim.fma_gflops;
      const double roof = l.wall * 1e9 / r.flops_or_bytes;
      const double roof_cpu = l.cpu * 1e9 / r.flops_or_bytes;
      const double rate = r.n / r.t.wall, rate_cpu = r.n / r.t.cpu;
      const std::string what = std::to_string(nt) + "-thread " + r.phase;
      const std::string why =
          r.decode ? "the bytes per decoded token (" + r.work +
                         ": active weights, output projection, state, KV) undercount what it "
                         "reads, or the bandwidth was measured while other work loaded the "
                         "machine"
                   : "the FLOPs per prompt token (" + r.work +
                         ") undercount the model's work, or the FMA peak was measured while "
                         "other work loaded the machine";
      const double f = r.int8 ? rate / roof : checked_fraction(rate, roof, what, why);
      const double f_cpu =
          r.int8 ? rate_cpu / roof_cpu
                 : checked_fraction(rate_cpu, roof_cpu, what + " (CPU-time clock)", why);
      std::printf("%-8d %-13s %-13s %10.1f %10.1f %6.0f%% %10.1f %10.1f %6.0f%%\n", nt,
                  r.phase.c_str(), r.work.c_str(), rate, roof, 100 * f, rate_cpu, roof_cpu,
                  100 * f_cpu);
    }
    std::fflush(stdout);
  }
  std::printf(
      "\nprefill: one forward call per prompt from position 0, logits of the last "
      "position; roofline = FMA peak / FLOPs per prompt token.\n"
      "decode: %lld tokens one per call after a %lld-token prompt; roofline = read "
      "bandwidth / bytes per token (mean over the decoded positions).\n"
      "cpu columns: rates by CPU time per thread (a shared machine's neighbours "
      "excluded), against limits measured by the same clock.\n",
      (long long)o.decode, (long long)p0);
  if (peer) print_peer_table(std::filesystem::path(path).filename().string(), peer_rows);
  if (!o.image.empty()) return image_bench_run(o);
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
  c->add_option(
      "--type", o->type,
      "generated model: one weight type for every matrix (f32, f16, bf16, q4_0, q4_1, q5_0, "
      "q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, iq4_xs, iq2_xxs, iq2_xs, iq2_s, "
      "iq3_xxs, iq3_s, iq1_s, iq1_m, tq1_0, tq2_0, mxfp4)");
  c->add_option("--prompts", o->prompts, "prefill prompt lengths (default 128,512,2048)");
  c->add_option("--decode", o->decode, "decoded tokens after a 128-token prompt (default 32)");
  c->add_option("--threads", o->threads, "thread counts (default 1,2)");
  c->add_option("--simd", o->simd, "off|avx2|avx512");
  c->add_option("--activations", o->activations,
                "f32|q8|f32,q8: numerics profiles to measure, each measure of every one in turn "
                "(default f32; q8: 8-bit activations, integer dot products; its prefill rows' "
                "FMA roofline is not a bound)");
  c->add_flag("--keep", o->keep, "keep the generated GGUF");
  c->add_flag("--huge-pages", o->huge_pages,
              "weights in a private copy of 2 MiB pages instead of the file's mapping (fewer TLB "
              "misses; same results)");
  c->add_option("--peer", o->peer,
                "llama-bench=PATH: also run llama.cpp's llama-bench on the same --model file and "
                "threads, each measure right after invar's, and print the ratio table");
  c->add_option("--repeat", o->repeat,
                "rounds of every measure; the best round counts (default 1)");
  c->add_option("--image", o->image,
                "PNG or JPEG: also time encoding it with --mmproj's vision tower per thread "
                "count (as `invar bench vision`), beside llama.cpp's llama-mtmd-cli when a peer "
                "is given");
  c->add_option("--mmproj", o->mmproj, "--image: the vision tower (mmproj GGUF)");
  c->add_option("--peer-mtmd", o->peer_mtmd,
                "--image: llama-mtmd-cli=PATH (default: beside --peer's llama-bench)");
  return [o]() { return run_bench(*o); };
});

}  // namespace
}  // namespace invar::app
