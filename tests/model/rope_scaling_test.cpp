// RoPE scaling ({arch}.rope.scaling.*): generated files with YaRN and linear scaling against the
// float64 oracle (tests/model/float64_oracle.py builds the frequencies the way HF's rotary code
// does, independently of src/kernels/rope.cpp), at positions past the original context; the same
// weights without the keys must score far from it (else the scaling did not run); and a scaling
// invar does not compute is refused by the key's name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "forge/make_model.h"
#include "gguf/gguf.h"
#include "model_harness.h"
#include "test_process_dir.h"

namespace invar::test {
namespace {

constexpr int kPrompt = 80;  // past the original context of 64
constexpr int kSteps = 4;    // greedy steps after the prompt
constexpr int kTop = 20;
constexpr double kTol = 1e-4;
constexpr int64_t kOrigCtx = 64;

std::string dir() {
  return test_process_dir("model/rope_scaling");
}

// A tiny model whose correction range falls inside its pairs: R = 16 (8 pairs), base 100, an
// original context of 64: YaRN keeps pair 0's frequency, interpolates pairs 5-7, ramps between.
MakeModelConfig scaled_config(Arch arch, const std::string& kind, double factor) {
  MakeModelConfig c = tiny_model_config(arch);
  c.n_rot = 16;
  c.rope_base = 100;
  c.rope_sections = {4, 2, 2, 0};
  c.n_ctx = int64_t(double(kOrigCtx) * factor);
  c.rope_scaling = kind;
  c.rope_scaling_factor = factor;
  c.rope_scaling_orig_ctx = kind == "yarn" ? kOrigCtx : 0;
  return c;
}

// invar's logits at every position of prompt + greedy steps: [T][V]; `tokens` gets the sequence.
std::vector<float> run_invar(const std::string& path, std::vector<int32_t>& tokens, int64_t& V) {
  auto m = Model::load(path);
  V = m->hparams().n_vocab;
  tokens.clear();
  for (int i = 0; i < kPrompt; ++i) tokens.push_back(int32_t((i * 37 + 5) % V));
  ThreadPool pool(2);
  SeqState st(*m, kPrompt + kSteps);
  std::vector<float> all = run_chunked(*m, st, tokens, 16, pool);
  for (int s = 0; s + 1 < kSteps; ++s) {
    const float* row = all.data() + (all.size() / size_t(V) - 1) * size_t(V);
    const int32_t next = argmax_of(row, V);
    tokens.push_back(next);
    const std::vector<float> lg = run_chunked(*m, st, {next}, 0, pool, int64_t(tokens.size()) - 1);
    all.insert(all.end(), lg.begin(), lg.end());
  }
  return all;
}

// max |log-softmax difference| over both top-20 lists at positions [from, T); NaN is worst.
double worst_diff(const std::vector<float>& inv, const std::vector<double>& oracle, int64_t V,
                  size_t from) {
  double worst = 0;
  for (size_t t = from; t < inv.size() / size_t(V); ++t) {
    const std::vector<double> row(inv.begin() + t * V, inv.begin() + (t + 1) * V);
    const double d = top_k_worst_diff(log_softmax_f64(row.data(), V),
                                      log_softmax_f64(oracle.data() + t * size_t(V), V), kTop);
    worst = std::isnan(d) || std::isnan(worst) ? std::nan("") : std::max(worst, d);
  }
  return worst;
}

void check_scaled(Arch arch, const std::string& kind, double factor) {
  const std::string a(arch_name(arch));
  const std::string scaled = dir() + "/" + a + "-" + kind + ".gguf";
  const std::string plain = dir() + "/" + a + "-" + kind + "-unscaled.gguf";
  MakeModelConfig c = scaled_config(arch, kind, factor);
  write_generated(c, scaled);
  c.rope_scaling.clear();
  write_generated(c, plain);

  std::vector<int32_t> tokens;
  int64_t V = 0;
  const std::vector<float> inv = run_invar(scaled, tokens, V);
  ASSERT_EQ(inv.size(), tokens.size() * size_t(V));
  const auto oracle = float64_oracle_logits({{scaled, &tokens, V}, {plain, &tokens, V}}, dir());
  ASSERT_EQ(oracle.size(), 2u);
  const double past = worst_diff(inv, oracle[0], V, size_t(kOrigCtx));
  const double all = worst_diff(inv, oracle[0], V, 0);
  const double unscaled = worst_diff(inv, oracle[1], V, size_t(kOrigCtx));
  std::printf(
      "%-10s %-6s x%-3g positions %d-%zu: vs oracle %.2g (all positions %.2g), vs the "
      "unscaled oracle %.2g\n",
      a.c_str(), kind.c_str(), factor, int(kOrigCtx), tokens.size() - 1, past, all, unscaled);
  EXPECT_LE(past, kTol);
  EXPECT_LE(all, kTol);
  EXPECT_GT(unscaled, 10 * std::max(past, 1e-6)) << "the scaling made no difference";
  std::filesystem::remove(scaled);
  std::filesystem::remove(plain);
}

TEST(RopeScaling, YarnQwen3nextAgainstOracle) {
  check_scaled(Arch::qwen3next, "yarn", 4);
}
TEST(RopeScaling, YarnQwen35ImropeAgainstOracle) {
  check_scaled(Arch::qwen35, "yarn", 4);
}
TEST(RopeScaling, LinearQwen35AgainstOracle) {
  check_scaled(Arch::qwen35, "linear", 2);
}

// A YaRN model (`with_scaling`) or the same without scaling keys, plus `key` set to `value`
// (string or float), as a file from elsewhere could carry it.
std::string file_with(bool with_scaling, const std::string& key, const std::string& value,
                      bool as_string) {
  MakeModelConfig c = scaled_config(Arch::qwen35, "yarn", 4);
  if (!with_scaling) c.rope_scaling.clear();
  auto vocab = GgufFile::open(std::string(INVAR_TEST_DATA_DIR) + "/models/qwen35-tiny.gguf");
  GgufWriter keys;
  const int64_t n_vocab = make_model_copy_vocab(*vocab, keys);
  GgufWriter w;
  make_model(c, n_vocab, w);
  if (as_string)
    w.set_string("qwen35." + key, value);
  else
    w.set_f32("qwen35." + key, std::stof(value));
  make_model_copy_vocab(*vocab, w);
  const std::string out = dir() + "/" + key + ".gguf";
  w.write(out);
  return out;
}

std::string load_error(const std::string& path) {
  try {
    Model::load(path);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(RopeScaling, UnimplementedScalingRefusedByName) {
  const std::string longrope = file_with(false, "rope.scaling.type", "longrope", true);
  std::string e = load_error(longrope);
  EXPECT_NE(e.find("qwen35.rope.scaling.type"), std::string::npos) << e;
  EXPECT_NE(e.find("longrope"), std::string::npos) << e;
  const std::string logmul = file_with(true, "rope.scaling.yarn_log_multiplier", "0.1", false);
  e = load_error(logmul);
  EXPECT_NE(e.find("qwen35.rope.scaling.yarn_log_multiplier"), std::string::npos) << e;
  std::filesystem::remove(longrope);
  std::filesystem::remove(logmul);
}

// The context a request may use follows the scaled length: original context × factor.
TEST(RopeScaling, ContextLimitFollowsTheScaledLength) {
  MakeModelConfig c = scaled_config(Arch::qwen3next, "yarn", 4);
  c.n_ctx = kOrigCtx;  // a file whose context_length was not raised
  const std::string path = dir() + "/limit.gguf";
  write_generated(c, path);
  auto m = Model::load(path);
  EXPECT_EQ(m->hparams().n_ctx_train, kOrigCtx);
  EXPECT_EQ(m->hparams().n_ctx_limit(), 4 * kOrigCtx);
  EXPECT_EQ(m->hparams().rope_scaling.type, RopeScalingType::yarn);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace invar::test
