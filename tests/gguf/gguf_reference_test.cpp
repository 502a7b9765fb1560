// The reference GGUFs read back with the hyper-parameters of the configs they were made from.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "model/hparams.h"
#include "test_data.h"

namespace invar {
namespace gguf_reference_test {

const std::string kData = INVAR_TEST_DATA_DIR;

nlohmann::json load_config(const std::string& name) {
  return test::load_reference(name).at("config");
}

void expect_matches_config(const std::string& name, Arch arch) {
  const nlohmann::json c = load_config(name);
  auto f = GgufFile::open(kData + "/models/" + name + ".gguf");
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  const Hparams hp = hparams_from_gguf(*f);
  EXPECT_EQ(hp.arch, arch);
  EXPECT_EQ(arch_name(hp.arch), c.at("arch").get<std::string>());
  EXPECT_EQ(hp.n_embd, c.at("E").get<int64_t>());
  EXPECT_EQ(hp.n_layer, c.at("L").get<int64_t>());
  EXPECT_EQ(hp.n_ctx_train, c.at("ctx").get<int64_t>());
  EXPECT_EQ(hp.n_head, c.at("H").get<int64_t>());
  EXPECT_EQ(hp.n_head_kv, c.at("Hkv").get<int64_t>());
  EXPECT_EQ(hp.head_dim, c.at("D").get<int64_t>());
  EXPECT_EQ(hp.n_rot, c.at("rot").get<int64_t>());
  EXPECT_EQ(hp.rope_freq_base, c.at("base").get<double>());
  EXPECT_EQ(hp.rms_eps, float(c.at("eps").get<double>()));
  EXPECT_EQ(hp.full_attention_interval, c.at("interval").get<int64_t>());
  EXPECT_EQ(hp.ssm_d_conv, c.at("conv").get<int64_t>());
  EXPECT_EQ(hp.ssm_d_state, c.at("Dk").get<int64_t>());
  EXPECT_EQ(hp.ssm_n_group, c.at("Hk").get<int64_t>());
  EXPECT_EQ(hp.ssm_dt_rank, c.at("Hv").get<int64_t>());
  EXPECT_EQ(hp.ssm_d_inner, c.at("Dk").get<int64_t>() * c.at("Hv").get<int64_t>());
  EXPECT_EQ(hp.tied_embeddings, c.at("tied").get<bool>());
  EXPECT_EQ(hp.n_vocab, 401);
  EXPECT_EQ(hp.n_layer_nextn, 0);
  EXPECT_FALSE(hp.legacy_ssm_in);
  if (c.contains("NE")) {
    EXPECT_EQ(hp.n_expert, c.at("NE").get<int64_t>());
    EXPECT_EQ(hp.n_expert_used, c.at("K").get<int64_t>());
    EXPECT_EQ(hp.n_ff_exp, c.at("Fe").get<int64_t>());
    EXPECT_EQ(hp.n_ff_shexp, c.at("Fs").get<int64_t>());
    EXPECT_EQ(hp.fused_gate_up_exps, c.at("fused_gate_up").get<bool>());
  }
  if (c.contains("F")) {
    EXPECT_EQ(hp.n_ff, c.at("F").get<int64_t>());
  }
  if (c.contains("sections")) {
    const auto s = c.at("sections").get<std::vector<int32_t>>();
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(hp.rope_sections[i], i < s.size() ? s[i] : 0);
    EXPECT_TRUE(hp.rope_imrope);
  } else {
    EXPECT_FALSE(hp.rope_imrope);
  }
  ASSERT_EQ(int64_t(hp.recurrent.size()), hp.n_layer);
  for (int64_t i = 0; i < hp.n_layer; ++i)
    EXPECT_EQ(hp.recurrent[size_t(i)], (i + 1) % hp.full_attention_interval != 0) << "layer " << i;
  // Tensor data lies inside the file, in order, aligned.
  for (const auto& t : f->tensors()) {
    EXPECT_EQ(t.type, DType::F32) << t.name;
    EXPECT_EQ(t.n_bytes, uint64_t(t.n_elements()) * 4) << t.name;
    EXPECT_EQ((t.data - f->bytes()) % 32, 0) << t.name;
    EXPECT_LE(uint64_t(t.data - f->bytes()) + t.n_bytes, f->file_size()) << t.name;
  }
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").size(), 401u);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens")[398], "<|endoftext|>");
  EXPECT_EQ(f->get_int("tokenizer.ggml.eos_token_id"), 398);
  EXPECT_FALSE(f->get_bool("tokenizer.ggml.add_bos_token"));
}

TEST(GgufReference, Qwen3NextTinyMatchesConfig) {
  expect_matches_config("qwen3next-tiny", Arch::qwen3next);
}
TEST(GgufReference, Qwen35TinyMatchesConfig) {
  expect_matches_config("qwen35-tiny", Arch::qwen35);
}

TEST(GgufReference, KnownTensorValues) {
  // qwen3next-tiny: ssm_a holds −exp(A_log) (negative), norms are effective weights near 1.
  auto f = GgufFile::open(kData + "/models/qwen3next-tiny.gguf");
  const GgufTensorInfo* a = f->find_tensor("blk.0.ssm_a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->ne, std::vector<int64_t>({4}));
  for (int i = 0; i < 4; ++i) {
    float v;
    std::memcpy(&v, a->data + 4 * i, 4);
    EXPECT_LT(v, 0.0f);
  }
  const GgufTensorInfo* e = f->find_tensor("blk.0.ffn_gate_exps.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->ne, std::vector<int64_t>({64, 32, 4}));
  EXPECT_EQ(f->find_tensor("no.such.tensor"), nullptr);
  EXPECT_EQ(f->find("no.such.key"), nullptr);
  EXPECT_EQ(f->get_int_or("no.such.key", 5), 5);
}

TEST(GgufReference, DescribeNamesTheFields) {
  auto f = GgufFile::open(kData + "/models/qwen35-tiny.gguf");
  const std::string d = hparams_describe(hparams_from_gguf(*f));
  EXPECT_NE(d.find("arch = qwen35"), std::string::npos) << d;
  EXPECT_NE(d.find("n_embd = 96"), std::string::npos) << d;
  EXPECT_NE(d.find("rope_sections = [2, 1, 1, 0]"), std::string::npos) << d;
  EXPECT_NE(d.find("layers = RRARRA"), std::string::npos) << d;
}

// The reference files carry their format version; a file of another version (or none) is refused
// with a message naming the file and both versions, never read as if it were current.
TEST(ReferenceFormat, RefusesOtherVersions) {
  EXPECT_EQ(test::load_reference("qwen3next-tiny").at("format").get<int>(), test::kReferenceFormat);
  const std::string dir = std::string(INVAR_BINARY_DIR) + "/tests/gguf";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/reference_format_test.json";
  for (const std::string& body :
       {std::string(R"({"format":2,"config":{}})"), std::string(R"({"format":"1","config":{}})"),
        std::string(R"({"config":{}})")}) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << body;
    try {
      test::load_reference_file(path);
      ADD_FAILURE() << "accepted " << body;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("the tests read format 1"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc) << R"({"format":1,"config":{}})";
  EXPECT_EQ(test::load_reference_file(path).at("config"), nlohmann::json::object());
}

}  // namespace gguf_reference_test
}  // namespace invar
