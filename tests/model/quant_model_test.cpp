// Quantised models end to end: for every llama-quantize preset make-model offers, and for every
// weight type used alone, a small model is written, loaded and run; its logits must be finite and
// equal, bit for bit, those of the same model with every tensor dequantised (by ggml's rules) and
// written as F32: every weight type has the same canonical order (docs/numerics.md: 16 lanes over
// k, then a fixed tree) over the same exact weight values. Bit-identity across paths is proven
// in tests/kernels/matmul.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "forge/make_model.h"
#include "gguf/gguf.h"
#include "model_harness.h"
#include "quant/dequant.h"

namespace invar::test {
namespace {

std::string write(const MakeModelConfig& c, const std::string& name) {
  const std::string dir = std::string(INVAR_BINARY_DIR) + "/tests/model";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + name + ".gguf";
  write_generated(c, path);
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
  std::string mix;  // "type:tensors " for every type in the file, by name
};

void check_case(const Case& k) {
  SCOPED_TRACE(k.quant + " " + std::string(arch_name(k.arch)));
  const std::string name = "quant-" + k.quant + "-" + std::string(arch_name(k.arch));
  const std::string path = write(quant_test_config(k.arch, k.quant), name);
  std::map<std::string, int> types;
  {
    auto f = GgufFile::open(path);
    for (const auto& t : f->tensors()) ++types[std::string(dtype_name(t.type))];
  }
  std::string mix;
  for (const auto& [t, n] : types) mix += t + ":" + std::to_string(n) + " ";
  std::printf("%-8s %-9s %s\n", k.quant.c_str(), std::string(arch_name(k.arch)).c_str(),
              mix.c_str());
  EXPECT_EQ(mix, k.mix);

  const std::string twin = write_dequantised(path, name);
  const std::vector<float> q = logits_of(path);
  const std::vector<float> f = logits_of(twin);
  for (float v : q) ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ(bits_diff(q, f), "");
  std::remove(path.c_str());
  std::remove(twin.c_str());
}

TEST(QuantModel, PresetsMatchTheirDequantisedTwin) {
  // The mixes are the per-tensor types llama-quantize (llama.cpp build d32676d) chose for the
  // same models written as F32, compared tensor by tensor by hand: output q6_K (q8_0 for Q8_0),
  // attn_v / attn_qkv / attn_k q8_0 with 8 experts, Q4_K_M's q6_K ffn_down layers falling back to
  // q8_0 on 64-wide rows, q4_K → q5_0, q5_K → q5_1, iq4_xs → iq4_nl, q2_K/q3_K → q4_0.
  const Case cases[] = {
      {"q4_k_m", Arch::qwen3next, "f32:29 q4_K:25 q5_0:4 q5_1:2 q6_K:1 q8_0:10 "},
      {"q5_k_m", Arch::qwen35moe, "f32:29 q5_1:6 q5_K:27 q6_K:1 q8_0:10 "},
      {"q6_k", Arch::qwen35, "f32:21 q6_K:26 q8_0:6 "},
      {"q8_0", Arch::qwen3next, "f32:29 q8_0:42 "},
      {"iq4_xs", Arch::qwen35moe, "f32:29 iq4_nl:8 iq4_xs:27 q5_1:2 q6_K:1 q8_0:6 "},
      {"q3_k_m", Arch::qwen35, "f32:21 q3_K:21 q4_K:2 q5_0:6 q5_K:2 q6_K:1 "},
      {"q2_k", Arch::qwen3next, "f32:29 q2_K:25 q4_0:8 q5_1:2 q6_K:1 q8_0:6 "},
      {"q4_0", Arch::qwen35moe, "f32:29 q4_0:37 q6_K:1 q8_0:6 "},
  };
  for (const Case& k : cases) check_case(k);
}

TEST(QuantModel, LowBitPresetsMatchTheirDequantisedTwin) {
  // The mixes follow llama_tensor_get_type_impl (llama.cpp master) by hand, in its branches
  // without an importance matrix (llama-quantize itself refuses IQ1 / IQ2 / IQ3_XXS files
  // without one): output q5_K (IQ1/IQ2/IQ3_XXS) or q6_K; token_embd q2_K (IQ1, IQ2_XXS/XS),
  // iq3_s (IQ2_S/M, IQ3_XXS), q4_K (TQ); attn_v-like q4_K (IQ1/IQ2, IQ3 with n_gqa 4), q8_0 with 8
  // experts (not IQ1/IQ2); attn_k q4_K (IQ1/IQ2) or q8_0 with 8 experts, else iq2_s for IQ3_XXS
  // as attn_q; IQ3_M's ffn_down q4_K on layers 2, 3 (use_more_bits, 8 experts); attn_output q5_K
  // with 8 experts, else iq2_xxs (IQ1), iq3_s (IQ2_S/M, IQ3_XXS), q4_K (IQ3_M); MXFP4_MOE: the
  // expert tensors mxfp4, all else q8_0. Rows of 64 / 96 fall back: IQ types → iq4_nl, TQ →
  // q4_0, q3_K → q4_0, q4_K → q5_0, q5_K → q5_1.
  const Case cases[] = {
      {"iq3_m", Arch::qwen3next, "f32:29 iq3_s:25 iq4_nl:4 q5_0:4 q5_1:2 q6_K:1 q8_0:6 "},
      {"iq3_s", Arch::qwen35, "f32:21 iq3_s:21 iq4_nl:6 q4_K:4 q6_K:1 "},
      {"iq3_xxs", Arch::qwen35moe,
       "f32:29 iq2_s:2 iq3_s:1 iq3_xxs:24 q4_0:8 q5_1:2 q5_K:1 q8_0:6 "},
      {"iq2_m", Arch::qwen3next, "f32:29 iq2_s:24 iq3_s:1 iq4_nl:8 q4_K:6 q5_1:2 q5_K:1 "},
      {"iq2_s", Arch::qwen35, "f32:21 iq2_xs:20 iq3_s:1 iq4_nl:6 q4_K:4 q5_K:1 "},
      {"iq2_xs", Arch::qwen35moe, "f32:29 iq2_xs:26 iq4_nl:8 q2_K:1 q4_K:6 q5_1:2 q5_K:1 "},
      {"iq2_xxs", Arch::qwen3next, "f32:29 iq2_xxs:24 iq4_nl:8 q2_K:1 q4_K:6 q5_1:2 q5_K:1 "},
      {"iq1_m", Arch::qwen35, "f32:21 iq1_m:20 iq4_nl:6 q2_K:1 q4_K:4 q5_K:1 "},
      {"iq1_s", Arch::qwen35moe, "f32:29 iq1_s:26 iq4_nl:8 q2_K:1 q4_K:6 q5_1:2 q5_K:1 "},
      {"tq2_0", Arch::qwen3next, "f32:29 q4_0:10 q4_K:1 q6_K:1 q8_0:6 tq2_0:24 "},
      {"tq1_0", Arch::qwen35, "f32:21 q4_0:6 q4_K:1 q6_K:1 tq1_0:24 "},
      {"mxfp4_moe", Arch::qwen35moe, "f32:29 mxfp4:12 q8_0:32 "},
  };
  for (const Case& k : cases) check_case(k);
}

TEST(QuantModel, EveryTypeAloneMatchesItsDequantisedTwin) {
  const Case cases[] = {
      {"q4_1", Arch::qwen35, "f32:21 q4_1:32 "},
      {"q5_0", Arch::qwen3next, "f32:29 q5_0:42 "},
      {"q5_1", Arch::qwen35moe, "f32:29 q5_1:44 "},
      {"iq4_nl", Arch::qwen35, "f32:21 iq4_nl:32 "},
      {"q3_k", Arch::qwen3next, "f32:29 q3_K:32 q4_0:10 "},
      {"q4_k", Arch::qwen35moe, "f32:29 q4_K:34 q5_0:10 "},
      {"q5_k", Arch::qwen35, "f32:21 q5_1:6 q5_K:26 "},
      {"f16", Arch::qwen3next, "f16:42 f32:29 "},
      {"mxfp4", Arch::qwen35, "f32:21 mxfp4:32 "},
  };
  for (const Case& k : cases) check_case(k);
}

}  // namespace
}  // namespace invar::test
