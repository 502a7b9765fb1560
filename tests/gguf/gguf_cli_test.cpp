// `invar make-model` and `invar inspect` through the binary: deterministic files for every
// architecture, the real Qwen3 vocabulary, and the reference hparams printed by inspect.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>

#include "gguf_test_util.h"
#include "model/hparams.h"

namespace invar {
namespace gguf_cli_test {

const std::string kInvar = std::string(INVAR_BINARY_DIR) + "/apps/invar/invar";
const std::string kData = INVAR_TEST_DATA_DIR;

struct Result {
  int status;
  std::string out;
};

Result run(const std::string& args) {
  Result r{-1, ""};
  std::FILE* p = ::popen((kInvar + " " + args + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

const char* kSmall =
    " --embd 32 --layers 4 --interval 2 --heads 2 --heads-kv 1 --head-dim 16 --rot 8 --ff 64 "
    "--experts 4"
    " --experts-used 2 --ff-exp 32 --ff-shexp 32 --state 16 --groups 2 --v-heads 4 --conv 3 --ctx "
    "2048 --rope-base 50000";

TEST(GgufCli, MakeModelIsDeterministicForEveryArch) {
  const std::string vocab = " --vocab " + kData + "/models/qwen3next-tiny.gguf";
  for (const char* arch : {"qwen3next", "qwen35", "qwen35moe"}) {
    const std::string a = test::temp_path("a.gguf"), b = test::temp_path("b.gguf");
    const std::string common = std::string(" --arch ") + arch + kSmall + vocab + " --type q8_0";
    Result r = run("make-model" + common + " --seed 11 --out " + a);
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_TRUE(has(r.out, "wrote " + a)) << r.out;
    ASSERT_EQ(run("make-model" + common + " --seed 11 --out " + b).status, 0);
    EXPECT_EQ(test::sha256_file(a), test::sha256_file(b)) << arch;
    ASSERT_EQ(run("make-model" + common + " --seed 12 --out " + b).status, 0);
    EXPECT_NE(test::sha256_file(a), test::sha256_file(b)) << arch;

    auto f = GgufFile::open(a);
    const Hparams hp = hparams_from_gguf(*f);
    EXPECT_EQ(arch_name(hp.arch), arch);
    EXPECT_EQ(hp.n_embd, 32);
    EXPECT_EQ(hp.n_layer, 4);
    EXPECT_EQ(hp.head_dim, 16);
    EXPECT_EQ(hp.n_rot, 8);
    EXPECT_EQ(hp.ssm_d_conv, 3);
    EXPECT_EQ(hp.n_ctx_train, 2048);
    EXPECT_EQ(hp.rope_freq_base, 50000.0);
    EXPECT_EQ(hp.n_vocab, 401);
    EXPECT_EQ(f->find_tensor("token_embd.weight")->type, DType::Q8_0);
    EXPECT_EQ(f->get_string("tokenizer.ggml.pre"), "qwen2");
    std::remove(a.c_str());
    std::remove(b.c_str());
  }
}

TEST(GgufCli, MakeModelFlagsReachTheFile) {
  const std::string p = test::temp_path("flags.gguf");
  Result r = run(
      "make-model --arch qwen35moe" + std::string(kSmall) + " --vocab " + kData +
      "/models/qwen35-tiny.gguf --tied --fused-gate-up --sections 2 1 1 --type bf16 --out " + p);
  ASSERT_EQ(r.status, 0) << r.out;
  auto f = GgufFile::open(p);
  const Hparams hp = hparams_from_gguf(*f);
  EXPECT_TRUE(hp.tied_embeddings);
  EXPECT_TRUE(hp.fused_gate_up_exps);
  EXPECT_EQ(hp.rope_sections, (std::array<int32_t, 4>{2, 1, 1, 0}));
  EXPECT_EQ(hp.n_expert, 4);
  EXPECT_EQ(f->find_tensor("blk.0.attn_qkv.weight")->type, DType::BF16);
  EXPECT_EQ(f->find_tensor("blk.0.ssm_a")->type, DType::F32);
  std::remove(p.c_str());
}

// --mtp writes the MTP block, inspect lists it; --mtp-own-head needs --mtp.
TEST(GgufCli, MakeModelMtpAndInspectListsIt) {
  const std::string p = test::temp_path("mtp.gguf");
  Result r = run("make-model --arch qwen35" + std::string(kSmall) + " --vocab " + kData +
                 "/models/qwen35-tiny.gguf --mtp --mtp-own-head --type q8_0 --out " + p);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "4 layers + MTP block")) << r.out;
  r = run("inspect " + p);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "n_layer_nextn = 1")) << r.out;
  EXPECT_TRUE(has(r.out, "mtp = blk.4 (own embed_tokens shared_head_head shared_head_norm)"))
      << r.out;
  EXPECT_TRUE(has(r.out, "blk.4.nextn.eh_proj.weight")) << r.out;
  EXPECT_TRUE(has(r.out, "MTP block blk.4.*    17 tensors")) << r.out;
  EXPECT_TRUE(has(r.out, "MTP KV per token (--spec mtp)")) << r.out;
  r = run("make-model --mtp-own-head --vocab " + kData + "/models/qwen35-tiny.gguf --out " + p);
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(has(r.out, "--mtp-own-head needs --mtp")) << r.out;
  std::remove(p.c_str());
}

TEST(GgufCli, MakeModelWithTheQwen3Vocabulary) {
  const std::string p = test::temp_path("qwen3vocab.gguf");
  Result r =
      run("make-model --embd 16 --layers 2 --interval 2 --heads 1 --heads-kv 1 --head-dim 8 --rot "
          "4 --experts 2"
          " --experts-used 1 --ff-exp 8 --ff-shexp 8 --state 4 --groups 1 --v-heads 1 --tied "
          "--type bf16 --out " +
          p);
  ASSERT_EQ(r.status, 0) << r.out;
  auto f = GgufFile::open(p);
  const Hparams hp = hparams_from_gguf(*f);
  EXPECT_EQ(hp.n_vocab, 151669);
  const std::vector<std::string> tokens = f->get_string_array("tokenizer.ggml.tokens");
  EXPECT_EQ(tokens[151643], "<|endoftext|>");
  EXPECT_GT(f->get_string_array("tokenizer.ggml.merges").size(), 100000u);
  std::remove(p.c_str());
}

TEST(GgufCli, MakeModelRejectsBadFlags) {
  Result r = run("make-model --arch llama --out " + test::temp_path("x.gguf"));
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(has(r.out, "--arch must be qwen3next, qwen35 or qwen35moe, not 'llama'")) << r.out;
  r = run("make-model --heads 3 --heads-kv 2 --vocab " + kData + "/models/qwen35-tiny.gguf --out " +
          test::temp_path("x.gguf"));
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(has(r.out, "--heads must be a multiple of --heads-kv")) << r.out;
  r = run("make-model --type q4_k_x --out " + test::temp_path("x.gguf"));
  EXPECT_TRUE(has(r.out,
                  "--type must be a llama-quantize preset (q4_k_m, q5_k_m, q6_k, q8_0, "
                  "iq4_xs, q3_k_m, q2_k, q4_0, iq3_m, iq3_s, iq3_xxs, iq2_m, iq2_s, iq2_xs, "
                  "iq2_xxs, iq1_m, iq1_s, tq2_0, tq1_0, mxfp4_moe) or a weight type (f32, f16, "
                  "q4_0"))
      << r.out;
  // A tower alone has no vocabulary: --vocab there is refused, and nothing is written.
  const std::string tower = test::temp_path("tower.gguf");
  std::remove(tower.c_str());
  r = run("make-model --mmproj " + tower + " --vocab " + kData + "/models/qwen35-tiny.gguf");
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(has(r.out, "--vocab is the language model's (--out)")) << r.out;
  EXPECT_FALSE(std::filesystem::exists(tower));
}

TEST(GgufCli, InspectPrintsTheReferenceHparams) {
  Result r = run("inspect " + kData + "/models/qwen3next-tiny.gguf");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* s : {"architecture: qwen3next",
                        "n_embd = 64",
                        "n_layer = 4",
                        "n_head = 4",
                        "n_head_kv = 2",
                        "head_dim = 32",
                        "n_rot = 8",
                        "rope_freq_base = 1e+07",
                        "n_expert = 4",
                        "n_expert_used = 2",
                        "n_ff_exp = 32",
                        "n_ff_shexp = 48",
                        "ssm_d_state = 16",
                        "ssm_dt_rank = 4",
                        "layers = RRRA",
                        "tied_embeddings = false",
                        "GGUF v3",
                        "73 tensors",
                        "blk.3.attn_q.weight",
                        "{64, 256}",
                        "tokenizer.ggml.tokens",
                        "[string × 401]"})
    EXPECT_TRUE(has(r.out, s)) << s << "\n" << r.out;
  r = run("inspect --no-tensors " + kData + "/models/qwen35-tiny.gguf");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* s :
       {"architecture: qwen35", "n_embd = 96", "n_ff = 160", "rope_sections = [2, 1, 1, 0]",
        "ssm_dt_rank = 6", "layers = RRARRA", "tied_embeddings = true", "totals: 80 tensors"})
    EXPECT_TRUE(has(r.out, s)) << s << "\n" << r.out;
  EXPECT_FALSE(has(r.out, "blk.0.attn_qkv.weight"));
}

// A Q4_K_M file: per-type counts, bytes and bits per weight (q4_K is 144 bytes per 256 weights,
// q6_K 210), and the memory lines: qwen3next-tiny has one attention layer (Hkv 2, D 32) and
// three Gated DeltaNet layers.
TEST(GgufCli, InspectShowsWeightTypesAndMemory) {
  const std::string p = test::temp_path("q4km.gguf");
  Result r =
      run("make-model --type q4_k_m --embd 256 --layers 4 --interval 4 --heads-kv 2 "
          "--vocab " +
          kData + "/models/qwen35-tiny.gguf --out " + p);
  ASSERT_EQ(r.status, 0) << r.out;
  r = run("inspect --no-tensors " + p);
  std::remove(p.c_str());
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* s : {"4.5000 bits per weight", "6.5625 bits per weight", "q4_K", "q6_K",
                        "KV cache per token", "recurrent state per sequence"})
    EXPECT_TRUE(has(r.out, s)) << s << "\n" << r.out;
  r = run("inspect --no-tensors " + kData + "/models/qwen3next-tiny.gguf");
  ASSERT_EQ(r.status, 0) << r.out;
  // KV: 1 layer × 2 × 2 heads × 32 × 4 bytes; state: 3 × ((4 − 1) × CONV + Hv·Dk·Dk) × 4.
  EXPECT_TRUE(has(r.out, "KV cache per token                        512 bytes")) << r.out;
}

TEST(GgufCli, InspectReportsBrokenFiles) {
  const std::string p = test::temp_path("broken.gguf");
  std::FILE* f = std::fopen(p.c_str(), "wb");
  std::fwrite("GGUF\x03\0\0\0", 1, 8, f);
  std::fclose(f);
  Result r = run("inspect " + p);
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(has(r.out, "gguf: offset 8: tensor count")) << r.out;
  std::remove(p.c_str());
}

}  // namespace gguf_cli_test
}  // namespace invar
