// The vision tower under a request's bounds (issue 51): an image's token count from its header
// alone, equal to what the encode gives; the tower asks to stop between its units of work, stops
// when cancelled or over its CPU budget (counted), and an encode that is not stopped keeps the
// bits of the plain forward pass.
#include "vision/image_encoder.h"

#include <gtest/gtest.h>
#include <png.h>

#include <atomic>
#include <random>
#include <string>

#include "core/thread_pool.h"
#include "forge/make_mmproj.h"
#include "image_write.h"
#include "test_process_dir.h"
#include "vision/image_preprocess.h"
#include "vision/vision_forward.h"

namespace invar {
namespace {

std::string write_tower(const std::string& name) {
  GgufWriter w;
  make_mmproj(MakeMmprojConfig{}, w);  // 2 blocks, projection 96
  const std::string path = test::test_process_dir("image_encoder") + "/" + name + ".gguf";
  w.write(path);
  return path;
}

std::vector<uint8_t> random_png(int w, int h, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> rgb(size_t(w) * size_t(h) * 3);
  for (auto& v : rgb) v = uint8_t(rng());
  return test::png_encode(rgb, w, h, PNG_FORMAT_RGB);
}

// image_dims reads the size from the header alone: a file cut after its header (which no
// decoder takes) still has it, for PNG, JPEG and WebP, and the limits apply to it.
TEST(ImageDims, FromTheHeaderAlone) {
  std::mt19937 rng(3);
  RgbImage src{72, 40, std::vector<uint8_t>(72 * 40 * 3)};
  for (auto& v : src.rgb) v = uint8_t(rng());
  const std::vector<std::vector<uint8_t>> files = {
      test::png_encode(src.rgb, 72, 40, PNG_FORMAT_RGB), test::jpeg_encode(src, 90),
      test::webp_encode(src, true)};
  for (const auto& f : files) {
    const RgbImage full = image_decode(f);
    const ImageDims d = image_dims(f);
    EXPECT_EQ(d.width, full.width);
    EXPECT_EQ(d.height, full.height);
    EXPECT_EQ(d.width, 72);
    EXPECT_EQ(d.height, 40);
    EXPECT_THROW(image_dims(f, ImageLimits{.max_pixels = 100}), Error);
  }
  // PNG: signature and IHDR are the first 33 bytes; JPEG: the markers before the first scan.
  const std::vector<uint8_t> png_head(files[0].begin(), files[0].begin() + 33);
  EXPECT_THROW(image_decode(png_head), Error);
  EXPECT_EQ(image_dims(png_head).width, 72);
  EXPECT_THROW(image_dims(std::vector<uint8_t>{'G', 'I', 'F', '8', '9', 'a', 0, 0}), Error);
}

// What the server counts before the tower runs is what the encode produces.
TEST(ImageEncoder, GridFromTheHeaderIsTheEncodedGrid) {
  ImageEncoder enc(write_tower("grid"), 96, true, 1, 0);
  for (auto [w, h] : {std::pair{256, 128}, {100, 70}, {1000, 30}, {33, 500}}) {
    const std::vector<uint8_t> png = random_png(w, h, uint32_t(w + h));
    const auto [ny, nx] = enc.grid_of(png);
    const EncodedImage e = enc.encode(png);
    EXPECT_EQ(ny, e.ny) << w << " x " << h;
    EXPECT_EQ(nx, e.nx) << w << " x " << h;
  }
}

// The stop is asked between units (before the patch embedding, before each block's two halves,
// before the merger) and nowhere else; never stopping keeps the bits; stopping at any unit
// returns false.
TEST(ImageEncoder, TowerAsksBetweenUnitsAndKeepsItsBits) {
  const auto m = vision_model_load(write_tower("units"));
  const VisionImage img = image_preprocess(image_decode(random_png(128, 64, 1)), m->hp);
  ThreadPool pool(2);
  const std::vector<float> want = vision_encode(*m, img, pool);
  VisionBuffers buf;
  std::vector<float> got;
  int asked = 0;
  EXPECT_TRUE(vision_encode_until(*m, img, pool, buf, got, [&] { return ++asked, false; }));
  EXPECT_EQ(asked, 2 + 2 * int(m->hp.n_layer));
  EXPECT_EQ(got, want) << "asking to stop changed the bits";
  for (int at = 1; at <= 2 + 2 * int(m->hp.n_layer); ++at) {
    int n = 0;
    EXPECT_FALSE(vision_encode_until(*m, img, pool, buf, got, [&] { return ++n == at; }));
    EXPECT_EQ(n, at) << "the tower went on after it was told to stop";
  }
}

// A cancelled client and a spent budget stop the encode with EncodeStopped, counted apart from
// finished encodes; nothing is cached, and the next encode of the image has the bits.
TEST(ImageEncoder, CancelledAndOverBudgetStopAndAreCounted) {
  ImageEncoder enc(write_tower("stop"), 96, true, 2, int64_t(1) << 20);
  const std::vector<uint8_t> png = random_png(256, 128, 2);
  auto cancelled = std::make_shared<std::atomic<bool>>(true);
  try {
    enc.encode(png, {}, EncodeBounds{cancelled, 0, {}});
    ADD_FAILURE() << "a cancelled encode ran to its end";
  } catch (const EncodeStopped& e) {
    EXPECT_EQ(e.why, EncodeStop::cancelled);
  }
  try {
    enc.encode(png, {}, EncodeBounds{nullptr, 1e-9, {}});
    ADD_FAILURE() << "an encode over its budget ran to its end";
  } catch (const EncodeStopped& e) {
    EXPECT_EQ(e.why, EncodeStop::cpu_budget);
    EXPECT_GT(e.cpu_s, 1e-9);
  }
  ImageEncoderStats s = enc.stats();
  EXPECT_EQ(s.started, 2);
  EXPECT_EQ(s.cancelled, 1);
  EXPECT_EQ(s.over_budget, 1);
  EXPECT_EQ(s.encodes, 0);
  EXPECT_EQ(s.cache_bytes, 0) << "a stopped encode was cached";
  cancelled->store(false);
  const EncodedImage e = enc.encode(png, {}, EncodeBounds{cancelled, 60, {}});
  EXPECT_FALSE(e.cache_hit);
  EXPECT_GT(e.pool_cpu_s, 0) << "the worker's CPU was not counted";
  const auto m = vision_model_load(enc.path());
  ThreadPool one(1);
  EXPECT_EQ(*e.rows, vision_encode(*m, image_preprocess(image_decode(png), m->hp), one));
  s = enc.stats();
  EXPECT_EQ(s.encodes, 1);
  EXPECT_EQ(s.started, 3);
}

}  // namespace
}  // namespace invar
