// The vision forward pass on make-model's random towers: projected embeddings within 1e-4 of the
// float64 reference (vision_reference.py, written from the architecture), and the same bits for
// every thread count and SIMD level (rules N1, N2, contract C4/C7).
#include "vision/vision_forward.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>

#include "core/simd.h"
#include "core/thread_pool.h"
#include "forge/make_mmproj.h"
#include "simd_levels.h"
#include "test_process_dir.h"

namespace invar {
namespace {

std::string dir() {
  return test::test_process_dir("vision_forward");
}

std::string write_tower(const std::string& name, const MakeMmprojConfig& c) {
  GgufWriter w;
  make_mmproj(c, w);
  const std::string path = dir() + "/" + name + ".gguf";
  w.write(path);
  return path;
}

// Normalised pixels in about [−1, 1], as (v/255 − 0.5)/0.5 gives, from a fixed seed.
VisionImage random_image(int64_t width, int64_t height, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  VisionImage img{width, height, std::vector<float>(size_t(3 * width * height))};
  for (float& v : img.chw) v = u(rng);
  return img;
}

// The reference's embeddings of one image, [n][width] float64.
std::vector<double> reference(const std::string& mmproj, const VisionImage& img, size_t n) {
  const std::string image = dir() + "/image.f32", out = dir() + "/out.f64";
  std::ofstream(image, std::ios::binary)
      .write(reinterpret_cast<const char*>(img.chw.data()),
             std::streamsize(img.chw.size() * sizeof(float)));
  nlohmann::json jobs = nlohmann::json::array();
  jobs.push_back({{"mmproj", mmproj},
                  {"image", image},
                  {"width", img.width},
                  {"height", img.height},
                  {"out", out}});
  const std::string jobs_path = dir() + "/jobs.json";
  std::ofstream(jobs_path) << jobs.dump();
  const std::string cmd = std::string(INVAR_PYTHON3) + " " + INVAR_SOURCE_DIR +
                          "/tests/vision/vision_reference.py " + jobs_path;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::vector<double> v(n, std::nan(""));
  std::ifstream f(out, std::ios::binary);
  f.read(reinterpret_cast<char*>(v.data()), std::streamsize(n * sizeof(double)));
  EXPECT_EQ(size_t(f.gcount()), n * sizeof(double)) << out;
  return v;
}

// Compares invar's embeddings with the reference; prints the largest error.
void expect_matches_reference(const std::string& name, const MakeMmprojConfig& c,
                              const VisionImage& img) {
  const std::string path = write_tower(name, c);
  const auto m = vision_model_load(path);
  ThreadPool pool(2);
  const std::vector<float> got = vision_encode(*m, img, pool);
  const int64_t tokens = (img.width / 32) * (img.height / 32);
  ASSERT_EQ(int64_t(got.size()), tokens * m->hp.n_embd_out());
  const std::vector<double> want = reference(path, img, got.size());
  double worst = 0, scale = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::fabs(double(got[i]) - want[i]);
    if (!(e <= worst)) worst = e, at = i;
    scale = std::max(scale, std::fabs(want[i]));
  }
  std::printf(
      "%s: %lld tokens x %lld, max |invar - float64| = %.3g (at %zu: %.9g vs %.9g), "
      "max |value| %.3g\n",
      name.c_str(), static_cast<long long>(tokens), static_cast<long long>(m->hp.n_embd_out()),
      worst, at, double(got[at]), want[at], scale);
  EXPECT_LE(worst, 1e-4) << name << ": first mismatch at " << at;
}

TEST(VisionForward, MatchesFloat64Reference) {
  // 96 × 64 pixels: 6 × 4 patches of 16 (the 4 × 4 position grid interpolated to 4 rows and 6
  // columns), 3 × 2 merged tokens of the qwen35-tiny width 96.
  expect_matches_reference("tiny", MakeMmprojConfig{}, random_image(96, 64, 1));
}

TEST(VisionForward, DeepstackMatchesFloat64Reference) {
  MakeMmprojConfig c;
  c.n_layer = 3;
  c.deepstack = {0, 2};
  c.seed = 7;
  expect_matches_reference("deepstack", c, random_image(64, 128, 2));
}

// Published mmproj files store their matrices in F16 (patch kernels too), BF16 or Q8_0: the
// reference dequantises the file's weights by ggml's rules, so the bound is the same.
TEST(VisionForward, StoredTypesMatchFloat64Reference) {
  for (DType t : {DType::F16, DType::BF16, DType::Q8_0}) {
    MakeMmprojConfig c;
    c.type = t;
    c.seed = 11;
    expect_matches_reference(std::string(dtype_name(t)), c, random_image(64, 64, 5));
  }
}

TEST(VisionForward, BitIdenticalAcrossThreadsAndSimd) {
  MakeMmprojConfig c;
  c.deepstack = {1};
  const auto m = vision_model_load(write_tower("threads", c));
  const VisionImage img = random_image(128, 64, 3);
  ThreadPool one(1);
  const std::vector<float> base = vision_encode(*m, img, one);
  for (SimdLevel level : test::simd_levels_to_test()) {
    const test::SimdLevelRun run(level);
    for (int threads : {1, 2, 3, 5}) {
      ThreadPool pool(threads);
      const std::vector<float> got = vision_encode(*m, img, pool);
      ASSERT_EQ(got.size(), base.size());
      EXPECT_EQ(std::memcmp(got.data(), base.data(), got.size() * sizeof(float)), 0)
          << simd_name(level) << ", " << threads << " threads";
    }
    run.expect_kernels_ran();
  }
}

// Buffers kept across images of different sizes (larger first, then smaller, then larger) give
// the bits of fresh buffers: nothing of a previous image leaks into the next.
TEST(VisionForward, ReusedBuffersEqualFresh) {
  const auto m = vision_model_load(write_tower("reuse", MakeMmprojConfig{}));
  ThreadPool pool(2);
  VisionBuffers buf;
  std::vector<float> out;
  for (auto [w, h] : {std::pair<int64_t, int64_t>{128, 96}, {64, 64}, {96, 128}}) {
    const VisionImage img = random_image(w, h, uint32_t(w + h));
    vision_encode(*m, img, pool, buf, out);
    EXPECT_EQ(out, vision_encode(*m, img, pool)) << w << " x " << h;
  }
}

TEST(VisionForward, ImageSizeMustBeMergeMultiple) {
  const auto m = vision_model_load(write_tower("size", MakeMmprojConfig{}));
  ThreadPool pool(1);
  try {
    vision_encode(*m, random_image(96, 48, 4), pool);
    FAIL() << "96 x 48 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of 32"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace invar
