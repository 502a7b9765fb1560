// make_model: every architecture reads back, validates, is deterministic in the seed, and the
// weight types encode the same underlying draws.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "forge/quant_preset.h"
#include "gguf_test_util.h"

namespace invar {
namespace gguf_make_model_test {

struct Case {
  Arch arch;
  bool fused;
};

class MakeModelArch : public ::testing::TestWithParam<Case> {};

float f32_at(const GgufTensorInfo& t, int64_t i) {
  float v;
  std::memcpy(&v, t.data + 4 * i, 4);
  return v;
}

TEST_P(MakeModelArch, ReadsBackValidatesAndIsDeterministic) {
  MakeModelConfig c = test::tiny_config(GetParam().arch);
  c.fused_gate_up = GetParam().fused;
  const std::string a = test::temp_path("a.gguf"), b = test::temp_path("b.gguf"),
                    r = test::temp_path("r.gguf");
  test::write_model(c, a);
  test::write_model(c, b);
  EXPECT_EQ(test::sha256_file(a), test::sha256_file(b));

  auto f = GgufFile::open(a);
  const Hparams hp = hparams_from_gguf(*f);
  EXPECT_EQ(hp.arch, c.arch);
  EXPECT_EQ(hp.n_embd, c.n_embd);
  EXPECT_EQ(hp.n_layer, c.n_layer);
  EXPECT_EQ(hp.n_vocab, 16);
  EXPECT_EQ(hp.n_head, c.n_head);
  EXPECT_EQ(hp.n_head_kv, c.n_head_kv);
  EXPECT_EQ(hp.head_dim, c.head_dim);
  EXPECT_EQ(hp.n_rot, c.n_rot);
  EXPECT_EQ(hp.rope_freq_base, double(float(c.rope_base)));
  EXPECT_EQ(hp.ssm_d_state, c.ssm_state);
  EXPECT_EQ(hp.ssm_n_group, c.ssm_groups);
  EXPECT_EQ(hp.ssm_dt_rank, c.ssm_v_heads);
  EXPECT_EQ(hp.tied_embeddings, c.tied);
  EXPECT_EQ(hp.fused_gate_up_exps, c.fused_gate_up);
  EXPECT_EQ(hp.n_recurrent_layers(), 2);
  EXPECT_EQ(hp.n_attention_layers(), 2);
  if (hp.is_moe()) {
    EXPECT_EQ(hp.n_expert, c.n_expert);
    EXPECT_EQ(hp.n_expert_used, c.n_expert_used);
    EXPECT_EQ(hp.n_ff_exp, c.n_ff_exp);
    EXPECT_EQ(hp.n_ff_shexp, c.n_ff_shexp);
  } else {
    EXPECT_EQ(hp.n_ff, c.n_ff);
  }
  if (c.arch != Arch::qwen3next) {
    // n_rot 4 → 2 pairs → derived sections [1, 1, 0, 0].
    EXPECT_EQ(hp.rope_sections, (std::array<int32_t, 4>{1, 1, 0, 0}));
  }
  // Reading and re-writing reproduces the file: the reader saw every key and tensor exactly.
  test::rewrite(*f, r, {}, {}, nullptr);
  EXPECT_EQ(test::read_file(r), test::read_file(a));

  // Scales the math document asks for.
  const GgufTensorInfo* ssm_a = f->find_tensor("blk.0.ssm_a");
  ASSERT_NE(ssm_a, nullptr);
  for (int64_t i = 0; i < ssm_a->n_elements(); ++i) EXPECT_LT(f32_at(*ssm_a, i), -0.29f);
  const GgufTensorInfo* emb = f->find_tensor("token_embd.weight");
  double sum2 = 0;
  for (int64_t i = 0; i < emb->n_elements(); ++i) sum2 += double(f32_at(*emb, i)) * f32_at(*emb, i);
  EXPECT_NEAR(std::sqrt(sum2 / double(emb->n_elements())), 0.15, 0.02);
  const GgufTensorInfo* norm = f->find_tensor("output_norm.weight");
  for (int64_t i = 0; i < norm->n_elements(); ++i) EXPECT_NEAR(f32_at(*norm, i), 1.0f, 0.4f);

  c.seed += 1;
  test::write_model(c, b);
  EXPECT_NE(test::sha256_file(a), test::sha256_file(b));
  for (const auto& p : {a, b, r}) std::remove(p.c_str());
}

INSTANTIATE_TEST_SUITE_P(Archs, MakeModelArch,
                         ::testing::Values(Case{Arch::qwen3next, false}, Case{Arch::qwen35, false},
                                           Case{Arch::qwen35moe, false},
                                           Case{Arch::qwen35moe, true},
                                           Case{Arch::qwen3next, true}),
                         [](const auto& info) {
                           return std::string(arch_name(info.param.arch)) +
                                  (info.param.fused ? "_fused" : "");
                         });

// --mtp: one MTP block after the trunk, in llama.cpp's layout, for every architecture; the
// loader checks every tensor of it, and its own embedding / head are optional.
TEST_P(MakeModelArch, MtpBlockReadsBack) {
  for (bool own_head : {false, true}) {
    MakeModelConfig c = test::tiny_config(GetParam().arch);
    c.fused_gate_up = GetParam().fused;
    c.mtp = MtpKind::random;
    c.mtp_own_head = own_head;
    const std::string a = test::temp_path("mtp.gguf");
    test::write_model(c, a);
    auto f = GgufFile::open(a);
    const std::string arch(arch_name(c.arch));
    EXPECT_EQ(f->get_int(arch + ".block_count"), c.n_layer + 1);
    EXPECT_EQ(f->get_int(arch + ".nextn_predict_layers"), 1);
    const Hparams hp = hparams_from_gguf(*f);
    EXPECT_EQ(hp.n_layer, c.n_layer);
    EXPECT_EQ(hp.n_layer_nextn, 1);
    EXPECT_TRUE(hp.mtp) << hp.mtp_unusable;
    EXPECT_EQ(hp.mtp_own_embd, own_head);
    EXPECT_EQ(hp.mtp_own_head, own_head);
    EXPECT_TRUE(hp.mtp_own_head_norm);
    EXPECT_EQ(hp.n_attention_layers(), 2);  // the trunk's; the MTP KV is the drafter's
    const std::string b = "blk." + std::to_string(c.n_layer) + ".";
    const GgufTensorInfo* eh = f->find_tensor(b + "nextn.eh_proj.weight");
    ASSERT_NE(eh, nullptr);
    EXPECT_EQ(eh->ne, (std::vector<int64_t>{2 * c.n_embd, c.n_embd}));
    EXPECT_NE(f->find_tensor(b + "attn_q.weight"), nullptr);
    EXPECT_EQ(f->find_tensor(b + "attn_qkv.weight"), nullptr);  // always full attention
    EXPECT_NE(f->find_tensor(b + (hp.is_moe() ? "ffn_down_exps.weight" : "ffn_down.weight")),
              nullptr);
    std::remove(a.c_str());
  }
}

TEST(MakeModel, MtpBlockWithoutATensorIsUnusableNotFatal) {
  MakeModelConfig c = test::tiny_config(Arch::qwen35);
  c.mtp = MtpKind::random;
  const std::string a = test::temp_path("mtp-full.gguf"), b = test::temp_path("mtp-cut.gguf");
  test::write_model(c, a);
  test::rewrite(*GgufFile::open(a), b, {}, {"blk.4.nextn.hnorm.weight"}, nullptr);
  const Hparams hp = hparams_from_gguf(*GgufFile::open(b));
  EXPECT_EQ(hp.n_layer, 4);
  EXPECT_FALSE(hp.mtp);
  EXPECT_EQ(hp.mtp_unusable, "model: missing tensor 'blk.4.nextn.hnorm.weight' (expected shape {" +
                                 std::to_string(c.n_embd) + "})");
  for (const auto& p : {a, b}) std::remove(p.c_str());
}

TEST(MakeModel, FixedBytesForAFixedSeed) {
  // Pins the generator: a change to the draws or the layout changes this digest and must be
  // deliberate (models made by older builds would no longer be reproducible).
  const std::string p = test::temp_path("pinned.gguf");
  // Rows are drawn in chunks by several threads: neither may change a byte (a row per chunk
  // on three threads, then chunks of a few rows on two), quantised types included.
  const std::pair<int, int64_t> ways[] = {{1, GgufWriter::kChunkBytes}, {3, 1}, {2, 1000}};
  for (const auto& [threads, chunk] : ways) {
    test::write_model(test::tiny_config(Arch::qwen3next), p, threads, chunk);
    EXPECT_EQ(test::sha256_file(p),
              "2c697e6fec1a1409efd8cd757b79fbdc164bfd1d6e07b9b6add2b5d1372e1866")
        << threads << " threads, chunk " << chunk;
  }
  MakeModelConfig q = test::tiny_config(Arch::qwen3next);
  q.quant = "q8_0";
  std::string first;
  for (const auto& [threads, chunk] : ways) {
    test::write_model(q, p, threads, chunk);
    if (first.empty()) first = test::sha256_file(p);
    EXPECT_EQ(test::sha256_file(p), first) << threads << " threads, chunk " << chunk;
  }
  std::remove(p.c_str());
}

TEST(MakeModel, WeightTypesEncodeTheSameDraws) {
  MakeModelConfig c = test::tiny_config(Arch::qwen35moe);
  const std::string p32 = test::temp_path("f32.gguf");
  test::write_model(c, p32);
  auto f32 = GgufFile::open(p32);
  for (DType t : {DType::F16, DType::BF16, DType::Q8_0}) {
    c.type = t;
    const std::string p = test::temp_path("typed.gguf");
    test::write_model(c, p);
    auto f = GgufFile::open(p);
    const Hparams hp = hparams_from_gguf(*f);
    EXPECT_EQ(hp.n_embd, c.n_embd);
    EXPECT_EQ(f->get_int("general.file_type"), t == DType::F16 ? 1 : t == DType::BF16 ? 32 : 7);
    // Small tensors stay F32 whatever the weight type.
    for (const char* name :
         {"blk.0.ssm_a", "blk.0.ssm_dt.bias", "blk.0.ssm_conv1d.weight", "blk.0.attn_norm.weight",
          "blk.0.ffn_gate_inp.weight", "blk.0.ffn_gate_inp_shexp.weight"})
      EXPECT_EQ(f->find_tensor(name)->type, DType::F32) << name;
    const GgufTensorInfo* w = f->find_tensor("blk.0.attn_qkv.weight");
    const GgufTensorInfo* w32 = f32->find_tensor("blk.0.attn_qkv.weight");
    ASSERT_EQ(w->type, t);
    ASSERT_EQ(w->ne, w32->ne);
    for (int64_t i = 0; i < w->n_elements(); ++i) {
      const float x = f32_at(*w32, i);
      uint16_t h;
      switch (t) {
        case DType::F16:
          std::memcpy(&h, w->data + 2 * i, 2);
          ASSERT_EQ(h, f32_to_f16(x)) << i;
          break;
        case DType::BF16:
          std::memcpy(&h, w->data + 2 * i, 2);
          ASSERT_EQ(h, f32_to_bf16(x)) << i;
          break;
        default: {
          const uint8_t* blk = w->data + (i / 32) * kQ8BlockBytes;
          std::memcpy(&h, blk, 2);
          const float d = f16_to_f32(h);
          const float q = float(int8_t(blk[2 + i % 32]));
          ASSERT_LE(std::fabs(q * d - x), 0.51f * d + 1e-3f * std::fabs(x)) << i;
          break;
        }
      }
    }
    std::remove(p.c_str());
  }
  std::remove(p32.c_str());
}

TEST(MakeModel, ConfigErrorsNameTheFlag) {
  auto err = [](const std::function<void(MakeModelConfig&)>& edit) {
    MakeModelConfig c = test::tiny_config(Arch::qwen3next);
    edit(c);
    return test::error_of([&] { make_model_validate(c, 16); });
  };
  EXPECT_EQ(err([](MakeModelConfig&) {}), "");
  EXPECT_NE(err([](MakeModelConfig& c) {
              c.n_head = 3;
            }).find("--heads must be a multiple of --heads-kv"),
            std::string::npos);
  EXPECT_NE(err([](MakeModelConfig& c) { c.n_rot = 9; }).find("--rot must be even"),
            std::string::npos);
  EXPECT_NE(err([](MakeModelConfig& c) {
              c.ssm_v_heads = 3;
            }).find("--v-heads must be a multiple of --groups"),
            std::string::npos);
  EXPECT_NE(err([](MakeModelConfig& c) { c.n_embd = 0; }).find("--embd 0 is out of range"),
            std::string::npos);
  EXPECT_NE(err([](MakeModelConfig& c) {
              c.n_expert_used = 5;
            }).find("--experts-used must be <= --experts"),
            std::string::npos);
  EXPECT_NE(err([](MakeModelConfig& c) {
              c.type = DType::Q8_0;
              c.n_embd = 48;
            })
                .find("tensor 'token_embd.weight' has rows of 48, not a multiple of the q8_0 block "
                      "size 32"),
            std::string::npos);
  EXPECT_NE(err([](MakeModelConfig& c) {
              c.n_embd = 1 << 20;
              c.n_ff_exp = 1 << 20;
            }).find("the limit is 2^36"),
            std::string::npos);
}

// The rules that the tiny test models do not reach (tests/model/quant_model_test.cpp checks their
// mixes): the IQ1 / IQ2 presets raise the first n_layer / 8 ffn_down tensors in llama-quant's
// order (by layer number, then name: blk.2 before blk.10, ffn_down_exps before ffn_down_shexp,
// whatever the file order), and MXFP4_MOE types only the 3-D expert tensors mxfp4.
TEST(QuantPlan, RulesBeyondTheTestModels) {
  QuantModelInfo m;
  m.n_layer = 16;
  m.n_expert = 8;
  m.n_gqa = 4;
  std::vector<QuantTensor> ts = {{"output.weight", {256, 1000}}};
  for (int i = 15; i >= 0; --i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    ts.push_back({b + "ffn_down_shexp.weight", {256, 256}});
    ts.push_back({b + "ffn_down_exps.weight", {256, 256, 8}});
  }
  auto plan = [&](const char* preset) { return quant_plan(*quant_scheme_parse(preset), m, ts); };
  const std::vector<DType> iq2 = plan("iq2_xxs"), iq2m = plan("iq2_m"), mx = plan("mxfp4_moe");
  for (size_t i = 1; i < ts.size(); ++i) {
    const bool first_two = ts[i].name.rfind("blk.0.", 0) == 0;  // blk.0's two come first
    EXPECT_EQ(iq2[i], first_two ? DType::Q2_K : DType::IQ2_XXS) << ts[i].name;
    EXPECT_EQ(iq2m[i], first_two ? DType::IQ3_S : DType::IQ2_S) << ts[i].name;
    EXPECT_EQ(mx[i], ts[i].ne.size() == 3 ? DType::MXFP4 : DType::Q8_0) << ts[i].name;
  }
  EXPECT_EQ(iq2[0], DType::Q5_K);
  EXPECT_EQ(mx[0], DType::Q8_0);
  // m.n_layer = 16: n / 8 = 2 tensors; with 32 layers blk.1's pair is raised too.
  m.n_layer = 32;
  EXPECT_EQ(plan("iq1_s")[ts.size() - 3], DType::Q2_K);  // blk.1.ffn_down_exps
}

}  // namespace gguf_make_model_test
}  // namespace invar
