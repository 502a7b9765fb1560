// Golden bits per numerics version (STYLE 6, DESIGN C1): the SHA-256 of every raw logit of fixed
// runs — a prefill in chunks, then greedy decode steps — on the reference models and on one
// quantised preset per family, under each activation profile, kept in
// tests/data/golden/<numerics version>/. Every other test compares invar with itself or with
// float64 at a tolerance; this one fails on any change of a logit bit, so a change of operation
// order (an RMSNorm sum, the delta rule, attention, RoPE) or of a detmath constant cannot pass
// without a new kNumericsVersion — two builds sharing a system_fingerprint, a cache tier or a
// fleet then compute the same bits. `make golden` rewrites the files on purpose
// (INVAR_GOLDEN_WRITE=1).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/activations.h"
#include "core/numerics_version.h"
#include "core/sha256.h"
#include "core/simd.h"
#include "model_harness.h"
#include "sanitizer_build.h"
#include "simd_levels.h"

namespace invar::test {
namespace {

namespace fs = std::filesystem;

struct GoldenCase {
  const char* name;   // the golden file's name
  const char* model;  // a reference model, or "ARCH:PRESET" generated with quant_test_config
  ActivationProfile profile;
};

constexpr GoldenCase kCases[] = {
    {"qwen3next-tiny", "qwen3next-tiny", ActivationProfile::f32},
    {"qwen35-tiny", "qwen35-tiny", ActivationProfile::f32},
    {"qwen3next-q4_k_m", "qwen3next:q4_k_m", ActivationProfile::f32},
    {"qwen3next-q4_k_m", "qwen3next:q4_k_m", ActivationProfile::q8},
    {"qwen35-q6_k", "qwen35:q6_k", ActivationProfile::f32},
    {"qwen35-q6_k", "qwen35:q6_k", ActivationProfile::q8},
    {"qwen35moe-q8_0", "qwen35moe:q8_0", ActivationProfile::f32},
    {"qwen35moe-q8_0", "qwen35moe:q8_0", ActivationProfile::q8},
};

constexpr int64_t kPrompt = 96, kChunk = 16, kDecode = 8;

std::string model_path(const std::string& model) {
  const auto colon = model.find(':');
  if (colon == std::string::npos) return test_model_path(model);
  // Written under a name of this test's own: other tests write their generated files at once.
  const std::string arch = model.substr(0, colon), preset = model.substr(colon + 1);
  const std::string path =
      std::string(INVAR_BINARY_DIR) + "/tests/model/golden-" + arch + "-" + preset + ".gguf";
  fs::create_directories(fs::path(path).parent_path());
  const Arch a = arch == "qwen35"      ? Arch::qwen35
                 : arch == "qwen35moe" ? Arch::qwen35moe
                                       : Arch::qwen3next;
  write_generated(quant_test_config(a, preset), path);
  return path;
}

std::string floats_sha256(const std::vector<float>& v) {
  return sha256_hex({reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)});
}

// "prefill <sha256>\ndecode <sha256>\ntokens <greedy ids>\n" of one case.
std::string golden_of(const GoldenCase& c) {
  const auto model = Model::load(model_path(c.model));
  const int64_t V = model->hparams().n_vocab;
  std::vector<int32_t> prompt;
  for (int64_t i = 0; i < kPrompt; ++i) prompt.push_back(static_cast<int32_t>(10 + (i * 37) % 300));
  ThreadPool pool(2);
  SeqState st(*model, kPrompt + kDecode + 1);
  const std::vector<float> prefill = run_chunked(*model, st, prompt, kChunk, pool);
  std::vector<float> decode;
  std::string tokens;
  int32_t next = argmax_of(prefill.data() + (kPrompt - 1) * V, V);
  for (int64_t i = 0; i < kDecode; ++i) {
    tokens += (i ? " " : "") + std::to_string(next);
    const std::vector<float> row = run_chunked(*model, st, {next}, 0, pool, kPrompt + i);
    decode.insert(decode.end(), row.begin(), row.end());
    next = argmax_of(row.data(), V);
  }
  return "prefill " + floats_sha256(prefill) + "\ndecode " + floats_sha256(decode) + "\ntokens " +
         tokens + "\n";
}

std::string golden_path(const GoldenCase& c) {
  return std::string(INVAR_TEST_DATA_DIR) + "/golden/" +
         std::string(numerics_version_of(c.profile)) + "/" + c.name + ".txt";
}

// At every SIMD level the CPU has: the bits are one per numerics version, whatever the ISA
// (contract C1), so each level must give the one golden.
TEST(Golden, LogitBitsAreTheNumericsVersionsOwn) {
  const bool write = std::getenv("INVAR_GOLDEN_WRITE") != nullptr;
  const ActivationProfile saved = activations_active();
  const SimdLevel saved_simd = simd_active();
  std::vector<SimdLevel> levels = simd_levels_to_test();
  // A sanitizer build checks its own bits at the best level; the release suite sweeps them.
  if (write || kSanitizerBuild) levels = {simd_detect()};
  for (const SimdLevel level : levels)
    for (const GoldenCase& c : kCases) {
      simd_set(level);
      activations_set(c.profile);
      const std::string got = golden_of(c);
      const std::string path = golden_path(c);
      const std::string what = std::string(c.name) + " (" +
                               std::string(activations_name(c.profile)) + ", " +
                               std::string(simd_name(simd_active())) + ")";
      if (write) {
        fs::create_directories(fs::path(path).parent_path());
        std::ofstream(path) << got;
        std::printf("golden: wrote %s\n", path.c_str());
        continue;
      }
      std::ifstream in(path);
      ASSERT_TRUE(in) << "no golden bits for " << what << " under numerics version "
                      << std::string(numerics_version_of(c.profile)) << " (" << path
                      << "): a new kNumericsVersion needs its goldens, made on purpose with "
                         "`make golden`";
      std::stringstream want;
      want << in.rdbuf();
      EXPECT_EQ(got, want.str())
          << "the logits of " << what << " differ from " << path
          << ": this build computes other bits than numerics version "
          << std::string(numerics_version_of(c.profile))
          << " promises. Bump kNumericsVersion (src/core/numerics_version.h) if the change is "
             "meant, then regenerate the goldens on purpose with `make golden`; otherwise find "
             "what changed a bit";
    }
  activations_set(saved);
  simd_set(saved_simd);
}

}  // namespace
}  // namespace invar::test
