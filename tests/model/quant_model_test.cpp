// Quantised models end to end: for every llama-quantize preset make-model offers, and for every
// weight type used alone, a small model is written, loaded and run; its logits must be finite and
// have the same bits as the same model with every tensor dequantised (by ggml's rules) and
// written as F32. That is the contract of quantised weights: the matrix product on them is the
// canonical F32 chain over their exact dequantised values (DESIGN N7).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/dequant.h"
#include "model/gguf.h"
#include "model/make_model.h"
#include "model_harness.h"

namespace invar::test {
namespace {

// Rows of 256 (E, VAL) take the K-quants; D·H = 64, Fe = 64 and Fs = 96 are not multiples of 256,
// so llama-quantize's fallback types (or the 32-blocks) appear too.
MakeModelConfig config(Arch arch, const std::string& quant) {
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

std::string vocab_source() {
  return std::string(INVAR_TEST_DATA_DIR) + "/models/qwen35-tiny.gguf";
}

std::string write(const MakeModelConfig& c, const std::string& name) {
  const std::string dir = std::string(INVAR_BINARY_DIR) + "/tests/model";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + name + ".gguf";
  auto vocab = GgufFile::open(vocab_source());
  GgufWriter keys;
  const int64_t n_vocab = make_model_copy_vocab(*vocab, keys);
  GgufWriter w;
  make_model(c, n_vocab, w);
  make_model_copy_vocab(*vocab, w);
  w.write(path);
  return path;
}

// The same file with every tensor dequantised to F32 (metadata copied unchanged).
std::string write_dequantised(const std::string& src, const std::string& name) {
  auto f = GgufFile::open(src);
  GgufWriter w;
  for (const auto& kv : f->kvs()) w.set_value(kv.key, kv.value);
  for (const auto& t : f->tensors()) {
    std::vector<uint8_t> bytes(size_t(t.n_elements()) * 4);
    dequant_row(t.type, t.data, reinterpret_cast<float*>(bytes.data()), t.n_elements());
    w.add_tensor(t.name, DType::F32, t.ne, std::move(bytes));
  }
  const std::string path = std::string(INVAR_BINARY_DIR) + "/tests/model/" + name + "-f32.gguf";
  w.write(path);
  return path;
}

std::vector<float> logits_of(const std::string& path) {
  auto m = Model::load(path);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 12; ++i) tokens.push_back(int32_t((i * 37 + 5) % m->hparams().n_vocab));
  ThreadPool pool(2);
  SeqState st(*m, int64_t(tokens.size()));
  return run_chunked(*m, st, tokens, 5, pool);
}

struct Case {
  std::string quant;
  Arch arch;
  std::vector<std::string> must_have;  // ggml type names the file must contain
};

void check_case(const Case& k) {
  SCOPED_TRACE(k.quant + " " + std::string(arch_name(k.arch)));
  const std::string name = "quant-" + k.quant + "-" + std::string(arch_name(k.arch));
  const std::string path = write(config(k.arch, k.quant), name);
  std::map<std::string, int> types;
  {
    auto f = GgufFile::open(path);
    for (const auto& t : f->tensors()) ++types[std::string(dtype_name(t.type))];
  }
  std::string mix;
  for (const auto& [t, n] : types) mix += t + ":" + std::to_string(n) + " ";
  std::printf("%-8s %-9s %s\n", k.quant.c_str(), std::string(arch_name(k.arch)).c_str(),
              mix.c_str());
  for (const std::string& t : k.must_have) EXPECT_GT(types[t], 0) << t << " missing: " << mix;

  const std::string twin = write_dequantised(path, name);
  const std::vector<float> q = logits_of(path);
  const std::vector<float> f = logits_of(twin);
  for (float v : q) ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ(bits_diff(q, f), "");
  std::remove(path.c_str());
  std::remove(twin.c_str());
}

TEST(QuantModel, PresetsMatchTheirDequantisedTwin) {
  // Expected mixes follow llama-quantize: output q6_K (q8_0 for q8_0), attn_v/attn_k q8_0 with
  // 8 experts, attn_output q5_K for the 8-expert Q4_K_M / Q3_K_M / Q2_K / IQ4_XS, ffn_down and
  // attn_qkv q6_K in Q4_K_M's "more bits" layers, 64-wide rows on the fallback types.
  const Case cases[] = {
      {"q4_k_m", Arch::qwen3next, {"q4_K", "q6_K", "q8_0", "q5_K", "q5_0"}},
      {"q5_k_m", Arch::qwen35moe, {"q5_K", "q6_K", "q8_0", "q5_1"}},
      {"q6_k", Arch::qwen35, {"q6_K", "q8_0"}},
      {"q8_0", Arch::qwen3next, {"q8_0"}},
      {"iq4_xs", Arch::qwen35moe, {"iq4_xs", "q6_K", "iq4_nl", "q5_K"}},
      {"q3_k_m", Arch::qwen35, {"q3_K", "q4_K", "q5_K", "q6_K", "q4_0"}},
      {"q2_k", Arch::qwen3next, {"q2_K", "q3_K", "q6_K", "q4_0", "q8_0"}},
      {"q4_0", Arch::qwen35moe, {"q4_0", "q6_K", "q8_0"}},
  };
  for (const Case& k : cases) check_case(k);
}

TEST(QuantModel, EveryTypeAloneMatchesItsDequantisedTwin) {
  const Case cases[] = {
      {"q4_1", Arch::qwen35, {"q4_1"}},       {"q5_0", Arch::qwen3next, {"q5_0"}},
      {"q5_1", Arch::qwen35moe, {"q5_1"}},    {"iq4_nl", Arch::qwen35, {"iq4_nl"}},
      {"q3_k", Arch::qwen3next, {"q3_K"}},    {"q4_k", Arch::qwen35moe, {"q4_K"}},
      {"q5_k", Arch::qwen35, {"q5_K"}},       {"f16", Arch::qwen3next, {"f16"}},
  };
  for (const Case& k : cases) check_case(k);
}

}  // namespace
}  // namespace invar::test
