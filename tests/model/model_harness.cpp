#include "model_harness.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "model/gguf.h"

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
                               int64_t chunk, ThreadPool& pool, int64_t pos0) {
  const int64_t n = int64_t(tokens.size()), V = m.hparams().n_vocab;
  std::vector<float> logits(static_cast<size_t>(n * V));
  if (chunk <= 0) chunk = n;
  for (int64_t p = 0; p < n; p += chunk) {
    SeqChunk c;
    c.tokens = tokens.data() + p;
    c.n_tokens = std::min(chunk, n - p);
    c.pos0 = pos0 + p;
    c.state = st.state.data();
    c.kv_blocks = st.blocks.data();
    c.block_size = st.block_size;
    c.all_logits = true;
    c.logits = logits.data() + p * V;
    m.forward({&c, 1}, pool);
  }
  return logits;
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
      std::snprintf(buf, sizeof buf, "\n  [%zu] (row %" PRId64 ", col %" PRId64 "): %.9g (0x%08x) vs %.9g (0x%08x)",
                    i, row_len ? int64_t(i) / row_len : 0, row_len ? int64_t(i) % row_len : int64_t(i),
                    double(a[i]), ua, double(b[i]), ub);
      msg += buf;
    }
  }
  return std::to_string(n_diff) + " of " + std::to_string(a.size()) + " floats differ; first:" + msg;
}

namespace {

// splitmix64 → uniform in [−1, 1): bit-identical everywhere, no libm.
struct Rng {
  uint64_t s;
  float next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return float(int64_t(z >> 40) - (int64_t(1) << 23)) / float(1 << 23);
  }
};

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace

void write_tiny_qwen35moe(const std::string& path, const std::string& vocab_from) {
  const int64_t E = 64, L = 4, H = 4, Hkv = 2, D = 16, ROT = 8, NE = 4, K = 2, Fe = 32, Fs = 48;
  const int64_t Kc = 4, Dk = 16, Hk = 2, Hv = 4, KEY = Dk * Hk, VAL = Dk * Hv, CONV = 2 * KEY + VAL;
  auto vf = GgufFile::open(vocab_from);
  const int64_t V = int64_t(vf->get_string_array("tokenizer.ggml.tokens").size());

  GgufWriter w;
  const std::string a = "qwen35moe.";
  w.set_string("general.architecture", "qwen35moe");
  w.set_u32(a + "context_length", 4096);
  w.set_u32(a + "embedding_length", uint32_t(E));
  w.set_u32(a + "block_count", uint32_t(L));
  w.set_u32(a + "attention.head_count", uint32_t(H));
  w.set_u32(a + "attention.head_count_kv", uint32_t(Hkv));
  w.set_u32(a + "attention.key_length", uint32_t(D));
  w.set_u32(a + "attention.value_length", uint32_t(D));
  w.set_u32(a + "rope.dimension_count", uint32_t(ROT));
  w.set_f32(a + "rope.freq_base", 10000.0f);
  w.set_i32_array(a + "rope.dimension_sections", {2, 1, 1, 0});
  w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  w.set_u32(a + "expert_count", uint32_t(NE));
  w.set_u32(a + "expert_used_count", uint32_t(K));
  w.set_u32(a + "expert_feed_forward_length", uint32_t(Fe));
  w.set_u32(a + "expert_shared_feed_forward_length", uint32_t(Fs));
  w.set_u32(a + "ssm.conv_kernel", uint32_t(Kc));
  w.set_u32(a + "ssm.state_size", uint32_t(Dk));
  w.set_u32(a + "ssm.group_count", uint32_t(Hk));
  w.set_u32(a + "ssm.time_step_rank", uint32_t(Hv));
  w.set_u32(a + "ssm.inner_size", uint32_t(VAL));
  w.set_u32(a + "full_attention_interval", 2);
  for (const GgufKv& kv : vf->kvs())
    if (kv.key.rfind("tokenizer.", 0) == 0) w.set_value(kv.key, kv.value);

  Rng rng{20261129};
  auto tensor = [&](const std::string& name, std::vector<int64_t> ne, float scale, float offset) {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = offset + scale * rng.next();
    w.add_tensor(name, DType::F32, ne, f32_bytes(v));
  };
  // Uniform [−s, s) has std s/√3: 0.26 ≈ 0.15 std embeddings, 0.35 ≈ 0.2 for residual writers.
  tensor("token_embd.weight", {E, V}, 0.26f, 0.0f);
  tensor("output_norm.weight", {E}, 0.1f, 1.0f);
  tensor("output.weight", {E, V}, 0.2f, 0.0f);
  const float in_s = 0.2f;
  for (int64_t il = 0; il < L; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    tensor(p + "attn_norm.weight", {E}, 0.1f, 1.0f);
    tensor(p + "post_attention_norm.weight", {E}, 0.1f, 1.0f);
    if ((il + 1) % 2 != 0) {
      tensor(p + "attn_qkv.weight", {E, CONV}, in_s, 0.0f);
      tensor(p + "attn_gate.weight", {E, VAL}, in_s, 0.0f);
      tensor(p + "ssm_conv1d.weight", {Kc, CONV}, 0.5f, 0.0f);
      tensor(p + "ssm_dt.bias", {Hv}, 0.5f, 0.0f);
      tensor(p + "ssm_a", {Hv}, 0.5f, -1.0f);
      tensor(p + "ssm_beta.weight", {E, Hv}, in_s, 0.0f);
      tensor(p + "ssm_alpha.weight", {E, Hv}, in_s, 0.0f);
      tensor(p + "ssm_norm.weight", {Dk}, 0.1f, 1.0f);
      tensor(p + "ssm_out.weight", {VAL, E}, 0.35f, 0.0f);
    } else {
      tensor(p + "attn_q.weight", {E, 2 * D * H}, in_s, 0.0f);
      tensor(p + "attn_k.weight", {E, D * Hkv}, in_s, 0.0f);
      tensor(p + "attn_v.weight", {E, D * Hkv}, in_s, 0.0f);
      tensor(p + "attn_output.weight", {D * H, E}, 0.35f, 0.0f);
      tensor(p + "attn_q_norm.weight", {D}, 0.1f, 1.0f);
      tensor(p + "attn_k_norm.weight", {D}, 0.1f, 1.0f);
    }
    tensor(p + "ffn_gate_inp.weight", {E, NE}, 0.3f, 0.0f);
    tensor(p + "ffn_gate_up_exps.weight", {E, 2 * Fe, NE}, in_s, 0.0f);
    tensor(p + "ffn_down_exps.weight", {Fe, E, NE}, 0.35f, 0.0f);
    tensor(p + "ffn_gate_inp_shexp.weight", {E}, in_s, 0.0f);
    tensor(p + "ffn_gate_shexp.weight", {E, Fs}, in_s, 0.0f);
    tensor(p + "ffn_up_shexp.weight", {E, Fs}, in_s, 0.0f);
    tensor(p + "ffn_down_shexp.weight", {Fs, E}, 0.35f, 0.0f);
  }
  w.write(path);
}

std::string test_model_path(const std::string& name) {
  const std::string shared = INVAR_SHARED_DIR;
  if (name != "qwen35moe-generated") return shared + "/models/" + name + ".gguf";
  const std::string dir = std::string(INVAR_BINARY_DIR) + "/tests/model";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/qwen35moe-generated.gguf";
  write_tiny_qwen35moe(path, shared + "/models/qwen35-tiny.gguf");
  return path;
}

}  // namespace invar::test
