// hparams_from_gguf rejects what llama.cpp would reject (or invar cannot run) with an error
// naming the key or tensor, and accepts the documented alternatives.
#include <gtest/gtest.h>

#include <cstring>

#include "gguf_test_util.h"
#include "model/hparams.h"

namespace invar {
namespace gguf_hparams_test {

class HparamsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (Arch a : {Arch::qwen3next, Arch::qwen35}) {
      const std::string p = test::temp_path(std::string(arch_name(a)) + ".gguf");
      test::write_model(test::tiny_config(a), p);
      base_.push_back(GgufFile::open(p));
      std::remove(p.c_str());  // the mapping stays valid
    }
  }
  const GgufFile& next() { return *base_[0]; }
  const GgufFile& q35() { return *base_[1]; }

  // The hparams error of a rewritten copy of src; "" if it is accepted.
  std::string error_after(const GgufFile& src, const std::set<std::string>& drop_keys,
                          const std::set<std::string>& drop_tensors,
                          const std::function<void(GgufWriter&)>& edit = nullptr) {
    const std::string p = test::temp_path("edited.gguf");
    test::rewrite(src, p, drop_keys, drop_tensors, edit);
    auto f = GgufFile::open(p);
    std::remove(p.c_str());
    return test::error_of([&] { last_ = hparams_from_gguf(*f); });
  }
  Hparams last_;
  std::vector<std::unique_ptr<GgufFile>> base_;
};

std::vector<uint8_t> zeros(size_t n) {
  return std::vector<uint8_t>(n, 0);
}

TEST_F(HparamsTest, BaseModelsAreAccepted) {
  EXPECT_EQ(error_after(next(), {}, {}), "");
  EXPECT_EQ(last_.arch, Arch::qwen3next);
  EXPECT_EQ(error_after(q35(), {}, {}), "");
  EXPECT_TRUE(last_.tied_embeddings);
}

TEST_F(HparamsTest, MissingRequiredKeys) {
  for (const char* k :
       {"context_length", "embedding_length", "block_count", "attention.layer_norm_rms_epsilon",
        "ssm.conv_kernel", "ssm.state_size", "ssm.group_count", "ssm.time_step_rank",
        "ssm.inner_size", "attention.head_count", "expert_count", "expert_used_count"}) {
    const std::string key = std::string("qwen3next.") + k;
    EXPECT_EQ(error_after(next(), {key}, {}), "model: missing required key '" + key + "'") << key;
  }
  EXPECT_EQ(error_after(q35(), {"qwen35.rope.dimension_sections"}, {}),
            "model: missing required key 'qwen35.rope.dimension_sections'");
  EXPECT_EQ(error_after(q35(), {"qwen35.feed_forward_length"}, {}),
            "model: missing required key 'qwen35.feed_forward_length'");
  EXPECT_EQ(error_after(next(), {"general.architecture"}, {}),
            "gguf: missing required key 'general.architecture'");
}

TEST_F(HparamsTest, DefaultsApplyWhenOptionalKeysAreAbsent) {
  // head_count_kv defaults to head_count: 4 kv heads then need attn_k {32, 32}, which the
  // file's {32, 16} is not, so the default is visible in the shape error.
  EXPECT_EQ(error_after(next(), {"qwen3next.attention.head_count_kv"}, {}),
            "model: tensor 'blk.1.attn_k.weight' has shape {32, 16}, expected {32, 32}");
  // rope.dimension_count defaults to head_dim; full_attention_interval to 4.
  EXPECT_EQ(error_after(next(), {"qwen3next.rope.dimension_count"}, {}), "");
  EXPECT_EQ(last_.n_rot, 8);
  EXPECT_NE(error_after(next(), {"qwen3next.full_attention_interval"}, {})
                .find("missing tensor 'blk.1.attn_qkv.weight'"),
            std::string::npos);
  // recurrent_layers overrides the interval.
  EXPECT_EQ(error_after(next(), {"qwen3next.full_attention_interval"}, {},
                        [](GgufWriter& w) {
                          w.set_i32_array("qwen3next.attention.recurrent_layers", {1, 0, 1, 0});
                        }),
            "");
  EXPECT_EQ(last_.recurrent, (std::vector<bool>{true, false, true, false}));
}

TEST_F(HparamsTest, InconsistentKeys) {
  EXPECT_EQ(
      error_after(next(), {}, {}, [](GgufWriter& w) { w.set_u32("qwen3next.ssm.inner_size", 40); }),
      "model: ssm.inner_size 40 / ssm.time_step_rank 4 (head_v_dim) must equal ssm.state_size 8");
  EXPECT_EQ(error_after(next(), {}, {},
                        [](GgufWriter& w) { w.set_u32("qwen3next.attention.value_length", 16); }),
            "model: attention.key_length 8 != attention.value_length 16 (the gated attention needs "
            "them equal)");
  EXPECT_EQ(error_after(next(), {}, {},
                        [](GgufWriter& w) { w.set_u32("qwen3next.rope.dimension_count", 10); }),
            "model: rope.dimension_count 10 must be even and <= head dim 8");
  EXPECT_EQ(error_after(next(), {}, {},
                        [](GgufWriter& w) { w.set_u32("qwen3next.block_count", 1000000); }),
            "model: key 'qwen3next.block_count' = 1000000 exceeds the 71 tensors in the file");
  EXPECT_EQ(error_after(next(), {}, {},
                        [](GgufWriter& w) { w.set_u32("qwen3next.embedding_length", 0); }),
            "model: key 'qwen3next.embedding_length' = 0 is out of range (1 to 16777216)");
  EXPECT_EQ(error_after(next(), {}, {},
                        [](GgufWriter& w) { w.set_string("qwen3next.context_length", "x"); }),
            "gguf: key 'qwen3next.context_length' has type string, expected an integer");
  EXPECT_EQ(error_after(next(), {}, {},
                        [](GgufWriter& w) { w.set_string("general.architecture", "llama"); }),
            "model: general.architecture 'llama' is not supported (invar runs qwen3next, qwen35, "
            "qwen35moe)");
  EXPECT_EQ(error_after(q35(), {}, {},
                        [](GgufWriter& w) {
                          w.set_i32_array("qwen35.rope.dimension_sections", {0, 0});
                        }),
            "model: key 'qwen35.rope.dimension_sections' sums to 0");
  EXPECT_EQ(error_after(next(), {}, {},
                        [](GgufWriter& w) { w.set_string_array("tokenizer.ggml.tokens", {"a"}); }),
            "model: tokenizer.ggml.tokens has 1 entries but token_embd.weight has 16 rows");
}

TEST_F(HparamsTest, TensorShapesAndPresence) {
  EXPECT_EQ(error_after(next(), {}, {"blk.0.ssm_a"}),
            "model: missing tensor 'blk.0.ssm_a' (expected shape {4})");
  EXPECT_EQ(
      error_after(next(), {}, {"blk.1.attn_q.weight"},
                  [](GgufWriter& w) {
                    w.add_tensor("blk.1.attn_q.weight", DType::F32, {32, 32}, zeros(32 * 32 * 4));
                  }),
      "model: tensor 'blk.1.attn_q.weight' has shape {32, 32}, expected {32, 64}");
  // A trailing 1 is the same shape.
  EXPECT_EQ(
      error_after(
          next(), {}, {"blk.0.ffn_gate_inp_shexp.weight"},
          [](GgufWriter& w) {
            w.add_tensor("blk.0.ffn_gate_inp_shexp.weight", DType::F32, {32, 1}, zeros(32 * 4));
          }),
      "");
  EXPECT_EQ(
      error_after(next(), {}, {},
                  [](GgufWriter& w) { w.add_tensor("extra.weight", DType::F32, {4}, zeros(16)); }),
      "model: unexpected tensor 'extra.weight' for qwen3next (llama.cpp would reject the file with "
      "'wrong number "
      "of tensors')");
  // MTP blocks past the trunk are tolerated.
  EXPECT_EQ(error_after(next(), {}, {},
                        [](GgufWriter& w) {
                          w.set_u32("qwen3next.block_count", 5);
                          w.set_u32("qwen3next.nextn_predict_layers", 1);
                          w.add_tensor("blk.4.nextn.eh_proj.weight", DType::F32, {4}, zeros(16));
                        }),
            "");
  EXPECT_EQ(last_.n_layer, 4);
  EXPECT_EQ(last_.n_layer_nextn, 1);
  // ... but a block without its tensors cannot draft: the trunk loads, and says why.
  EXPECT_FALSE(last_.mtp);
  EXPECT_EQ(last_.mtp_unusable,
            "model: missing tensor 'blk.4.attn_norm.weight' (expected shape {32})");
  // qwen35 has ssm_beta/ssm_alpha, not ssm_ba.
  EXPECT_EQ(error_after(q35(), {}, {"blk.0.ssm_beta.weight"}),
            "model: missing tensor 'blk.0.ssm_beta.weight' (expected shape {32, 4})");
  // Untied output must match token_embd.
  EXPECT_EQ(error_after(next(), {}, {"output.weight"}), "");
  EXPECT_TRUE(last_.tied_embeddings);
}

TEST_F(HparamsTest, TensorTypes) {
  EXPECT_EQ(
      error_after(next(), {}, {"blk.0.ssm_a"},
                  [](GgufWriter& w) { w.add_tensor("blk.0.ssm_a", DType::F16, {4}, zeros(8)); }),
      "model: tensor 'blk.0.ssm_a' has type f16, expected f32 (norms, ssm_a, ssm_dt.bias and "
      "ssm_conv1d are f32 "
      "in llama.cpp's layout)");
  EXPECT_EQ(
      error_after(next(), {}, {"blk.0.attn_gate.weight"},
                  [](GgufWriter& w) {
                    w.add_tensor("blk.0.attn_gate.weight", DType::BF16, {32, 32}, zeros(2048));
                  }),
      "");
}

TEST_F(HparamsTest, UnsupportedTensorTypeIsNamed) {
  // Patch the type id of token_embd ({32, 16} f32 = 2048 bytes) to a type invar does not
  // compute with: q8_1 (llama.cpp's activation type; 32-element blocks of 36 bytes fit the data).
  const std::string p = test::temp_path("q8_1.gguf");
  test::rewrite(next(), p, {}, {}, nullptr);
  std::vector<uint8_t> bytes = test::read_file(p);
  std::remove(p.c_str());
  const std::string name = "token_embd.weight";
  auto it = std::search(bytes.begin(), bytes.end(), name.begin(), name.end());
  ASSERT_NE(it, bytes.end());
  const size_t type_at = size_t(it - bytes.begin()) + name.size() + 4 + 2 * 8;
  uint32_t type;
  std::memcpy(&type, &bytes[type_at], 4);
  ASSERT_EQ(type, 0u);
  type = 9;  // q8_1
  std::memcpy(&bytes[type_at], &type, 4);
  auto f = GgufFile::from_memory(bytes.data(), bytes.size());
  EXPECT_EQ(test::error_of([&] { hparams_from_gguf(*f); }),
            "model: tensor 'token_embd.weight' has type q8_1, invar supports f32, f16, q4_0, q4_1, "
            "q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, iq2_xxs, iq2_xs, iq3_xxs, iq1_s, "
            "iq4_nl, iq3_s, iq2_s, iq4_xs, iq1_m, bf16, tq1_0, tq2_0, mxfp4");
}

TEST_F(HparamsTest, LegacySsmInAndFusedExperts) {
  // qwen3next: ssm_in {E, 2KEY+2VAL} instead of attn_qkv + attn_gate, in every recurrent layer.
  const int64_t E = 32, width = 2 * 16 + 2 * 32;
  EXPECT_EQ(error_after(next(), {},
                        {"blk.0.attn_qkv.weight", "blk.0.attn_gate.weight", "blk.2.attn_qkv.weight",
                         "blk.2.attn_gate.weight"},
                        [&](GgufWriter& w) {
                          w.add_tensor("blk.0.ssm_in.weight", DType::F32, {E, width},
                                       zeros(size_t(E * width * 4)));
                          w.add_tensor("blk.2.ssm_in.weight", DType::F32, {E, width},
                                       zeros(size_t(E * width * 4)));
                        }),
            "");
  EXPECT_TRUE(last_.legacy_ssm_in);
  EXPECT_EQ(error_after(next(), {}, {"blk.0.attn_qkv.weight", "blk.0.attn_gate.weight"},
                        [&](GgufWriter& w) {
                          w.add_tensor("blk.0.ssm_in.weight", DType::F32, {E, width},
                                       zeros(size_t(E * width * 4)));
                        }),
            "model: ssm_in is used in 1 of 2 recurrent layers; invar needs all or none");
  // Fused gate/up experts in one layer only.
  EXPECT_EQ(error_after(next(), {}, {"blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_exps.weight"},
                        [&](GgufWriter& w) {
                          w.add_tensor("blk.0.ffn_gate_up_exps.weight", DType::F32, {32, 64, 4},
                                       zeros(32 * 64 * 4 * 4));
                        }),
            "model: ffn_gate_up_exps is fused in 1 of 4 layers; invar needs all or none");
}

// The parts of a file llama-gguf-split cut up, with the keys it writes (split.no and split.count
// as u16, split.tensors.count as i32; the later parts without the model's keys), are refused by
// name with the command that merges them; a "split" into one part is a whole file.
TEST_F(HparamsTest, SplitFilePartsAreRefusedWithTheMergeCommand) {
  const auto split_keys = [](uint64_t no, uint64_t count) {
    return [no, count](GgufWriter& w) {
      GgufValue v;
      v.type = GgufType::UINT16;
      v.u64 = no;
      w.set_value("split.no", v);
      v.u64 = count;
      w.set_value("split.count", v);
      w.set_i32("split.tensors.count", 40);
    };
  };
  const std::string first = error_after(next(), {}, {"output.weight"}, split_keys(0, 3));
  EXPECT_NE(first.find("edited.gguf is part 1 of 3 of a split GGUF file (split.count = 3)"),
            std::string::npos)
      << first;
  EXPECT_NE(first.find("`llama-gguf-split --merge <...>-00001-of-00003.gguf merged.gguf`"),
            std::string::npos)
      << first;
  std::set<std::string> model_keys;
  for (const auto& kv : next().kvs())
    if (kv.key.rfind("general.", 0) == 0 || kv.key.rfind("qwen3next.", 0) == 0)
      model_keys.insert(kv.key);
  const std::string later = error_after(next(), model_keys, {}, split_keys(2, 3));
  EXPECT_NE(later.find("edited.gguf is part 3 of 3 of a split GGUF file"), std::string::npos)
      << later;
  EXPECT_EQ(error_after(next(), {}, {}, split_keys(0, 1)), "");
}

}  // namespace gguf_hparams_test
}  // namespace invar
