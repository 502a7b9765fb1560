#include "model_harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "forge/make_model.h"
#include "gguf/gguf.h"

// Test binaries outside tests/model link the harness for its generators only and name no model.

namespace invar::test {

SeqState::SeqState(const Model& m, int64_t capacity, int64_t bs)
    : state(static_cast<size_t>(m.state_floats()), 0.0f), block_size(bs) {
  const int64_t n_blocks = (capacity + bs - 1) / bs;
  const int64_t bf = m.kv_block_floats(bs);
  // NaN-filled: a read of a KV row nobody wrote shows up in the logits.
  kv.assign(static_cast<size_t>(n_blocks * bf), std::nanf(""));
  for (int64_t b = 0; b < n_blocks; ++b) blocks.push_back(kv.data() + b * bf);
}

std::vector<float> run_chunked(const Model& m, SeqState& st, const std::vector<int32_t>& tokens,
                               int64_t chunk, ThreadPool& pool, int64_t pos0,
                               const SeqImages* images) {
  const int64_t n = int64_t(tokens.size()), V = m.hparams().n_vocab;
  std::vector<float> logits(static_cast<size_t>(n * V));
  std::vector<const float*> rows;
  std::vector<RopePos> rope;
  if (chunk <= 0) chunk = n;
  for (int64_t p = 0; p < n; p += chunk) {
    SeqChunk c;
    if (images) {
      images->chunk_inputs(pos0 + p, std::min(chunk, n - p), m.hparams().n_embd, rows, rope);
      c.embd_rows = rows.data();
      if (m.hparams().rope_imrope) c.rope_pos = rope.data();
    }
    c.tokens = tokens.data() + p;
    c.n_tokens = std::min(chunk, n - p);
    c.pos0 = pos0 + p;
    c.state = st.state.data();
    c.kv_blocks = st.blocks.data();
    c.block_size = st.block_size;
    c.all_logits = true;
    c.logits = logits.data() + p * V;
    m.forward({&c, 1}, *m.scratch_make(c.n_tokens, 1), pool);
  }
  return logits;
}

std::vector<double> log_softmax_f64(const double* x, int64_t n) {
  const double m = *std::max_element(x, x + n);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(x[i] - m);
  std::vector<double> y(x, x + n);
  for (double& v : y) v -= m + std::log(s);
  return y;
}

std::vector<int64_t> top_ids_f64(const std::vector<double>& lp, int64_t k) {
  std::vector<int64_t> ids(lp.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int64_t(i);
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int64_t a, int64_t b) {
    return lp[size_t(a)] > lp[size_t(b)] || (lp[size_t(a)] == lp[size_t(b)] && a < b);
  });
  ids.resize(size_t(k));
  return ids;
}

double top_k_worst_diff(const std::vector<double>& li, const std::vector<double>& lo, int64_t k) {
  std::vector<int64_t> ids = top_ids_f64(lo, k);
  const std::vector<int64_t> ti = top_ids_f64(li, k);
  ids.insert(ids.end(), ti.begin(), ti.end());
  double worst = 0;
  for (int64_t id : ids) {
    // std::max would keep the old value past a NaN.
    const double d = std::fabs(li[size_t(id)] - lo[size_t(id)]);
    worst = std::isnan(d) ? d : std::max(worst, d);
  }
  return worst;
}

std::vector<std::vector<double>> float64_oracle_logits(const std::vector<OracleJob>& jobs,
                                                       const std::string& dir) {
  nlohmann::json j = nlohmann::json::array();
  for (size_t i = 0; i < jobs.size(); ++i)
    j.push_back({{"model", jobs[i].model},
                 {"tokens", *jobs[i].tokens},
                 {"out", dir + "/job" + std::to_string(i) + ".f64"}});
  const std::string jobs_path = dir + "/jobs.json";
  std::ofstream(jobs_path) << j.dump();
  const std::string cmd = std::string(INVAR_PYTHON3) + " " + INVAR_SOURCE_DIR +
                          "/tests/model/float64_oracle.py logits " + jobs_path;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::vector<std::vector<double>> out;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const std::string p = j[i]["out"];
    const size_t n = jobs[i].tokens->size() * size_t(jobs[i].n_vocab);
    std::vector<double> v(n, std::nan(""));
    std::ifstream f(p, std::ios::binary);
    f.read(reinterpret_cast<char*>(v.data()), std::streamsize(n * 8));
    EXPECT_EQ(size_t(f.gcount()), n * 8) << p;
    out.push_back(std::move(v));
    std::filesystem::remove(p);
  }
  std::filesystem::remove(jobs_path);
  return out;
}

std::string bits_diff(const std::vector<float>& a, const std::vector<float>& b, int64_t row_len) {
  if (a.size() != b.size())
    return "sizes differ: " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
  if (std::memcmp(a.data(), b.data(), a.size() * 4) == 0) return "";
  size_t n_diff = 0;
  std::string msg;
  for (size_t i = 0; i < a.size(); ++i) {
    uint32_t ua, ub;
    std::memcpy(&ua, &a[i], 4);
    std::memcpy(&ub, &b[i], 4);
    if (ua == ub) continue;
    if (n_diff++ < 5) {
      char buf[160];
      std::snprintf(buf, sizeof buf,
                    "\n  [%zu] (row %" PRId64 ", col %" PRId64 "): %.9g (0x%08x) vs %.9g (0x%08x)",
                    i, row_len ? int64_t(i) / row_len : 0,
                    row_len ? int64_t(i) % row_len : int64_t(i), double(a[i]), ua, double(b[i]),
                    ub);
      msg += buf;
    }
  }
  return std::to_string(n_diff) + " of " + std::to_string(a.size()) +
         " floats differ; first:" + msg;
}

int32_t argmax_of(const float* v, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return int32_t(best);
}

MakeModelConfig tiny_model_config(Arch arch, MtpKind mtp) {
  MakeModelConfig c;
  c.arch = arch;
  c.n_embd = 64;
  c.n_layer = 4;
  c.interval = 2;  // layers 1 and 3 attention
  c.n_head = 4;
  c.n_head_kv = 2;
  c.head_dim = 16;
  c.n_rot = 8;
  c.rope_base = 10000;
  c.rope_sections = {2, 1, 1, 0};
  if (arch == Arch::qwen35) c.n_ff = 96;  // the MoE archs keep the default (written, unused)
  c.n_expert = 4;
  c.n_expert_used = 2;
  c.n_ff_exp = 32;
  c.n_ff_shexp = 48;
  c.ssm_state = 16;
  c.ssm_groups = 2;
  c.ssm_v_heads = 4;
  c.mtp = mtp;
  c.seed = 20261129;
  return c;
}

void write_tiny_qwen35moe(const std::string& path, const std::string& vocab_from) {
  MakeModelConfig c = tiny_model_config(Arch::qwen35moe);
  c.fused_gate_up = true;
  write_generated(c, path, vocab_from);
}

MakeModelConfig quant_test_config(Arch arch, const std::string& quant) {
  MakeModelConfig c;
  c.arch = arch;
  c.n_embd = 256;
  c.n_layer = 4;
  c.interval = 2;
  c.n_head = 4;
  c.n_head_kv = 1;
  c.head_dim = 16;
  c.n_rot = 8;
  c.rope_base = 10000;
  c.n_ff = 96;
  c.n_expert = 8;
  c.n_expert_used = 2;
  c.n_ff_exp = 64;
  c.n_ff_shexp = 96;
  c.ssm_state = 32;
  c.ssm_groups = 2;
  c.ssm_v_heads = 8;
  c.seed = 77;
  c.quant = quant;
  return c;
}

void write_generated(const MakeModelConfig& c, const std::string& path,
                     const std::string& vocab_from) {
  auto vocab = GgufFile::open(vocab_from.empty()
                                  ? std::string(INVAR_TEST_DATA_DIR) + "/models/qwen35-tiny.gguf"
                                  : vocab_from);
  GgufWriter keys;
  const int64_t n_vocab = make_model_copy_vocab(*vocab, keys);
  make_model_validate(c, n_vocab);
  GgufWriter w;
  make_model(c, n_vocab, w);
  make_model_copy_vocab(*vocab, w);
  w.write(path);
}

std::string test_model_name() {
  const char* env = std::getenv("INVAR_TEST_MODEL");
  INVAR_CHECK(env && *env, "INVAR_TEST_MODEL names no model (tests/model/CMakeLists.txt sets it)");
  return env;
}

std::string test_model_path(const std::string& name) {
  const std::string data = INVAR_TEST_DATA_DIR;
  const bool generated = name.rfind("generated:", 0) == 0;
  if (name != "qwen35moe-generated" && !generated) return data + "/models/" + name + ".gguf";
  const std::string dir = std::string(INVAR_BINARY_DIR) + "/tests/model";
  std::filesystem::create_directories(dir);
  if (!generated) {
    const std::string path = dir + "/qwen35moe-generated.gguf";
    write_tiny_qwen35moe(path, data + "/models/qwen35-tiny.gguf");
    return path;
  }
  // "generated:ARCH:TYPE"
  const size_t colon = name.find(':', 10);
  const std::string arch = name.substr(10, colon - 10), quant = name.substr(colon + 1);
  Arch a = Arch::qwen3next;
  if (arch == "qwen35")
    a = Arch::qwen35;
  else if (arch == "qwen35moe")
    a = Arch::qwen35moe;
  else if (arch != "qwen3next")
    throw std::runtime_error("unknown architecture in " + name);
  const std::string path = dir + "/generated-" + arch + "-" + quant + ".gguf";
  write_generated(quant_test_config(a, quant), path);
  return path;
}

}  // namespace invar::test
