// Image inputs: PNG, JPEG and WebP decode through libpng / libjpeg-turbo / libwebp; hostile files
// (truncated, oversized headers, unknown formats) are refused with an Error before large
// allocations; the processor's size rule, resampling and normalisation.
#include <gtest/gtest.h>
#include <jpeglib.h>
#include <png.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/seq_images.h"
#include "forge/make_mmproj.h"
#include "image_write.h"
#include "vision/encode_cache.h"
#include "vision/image_decode.h"
#include "vision/image_preprocess.h"
#include "vision/vision_forward.h"

namespace invar {
namespace {

using test::jpeg_encode;
using test::png_encode;
using test::webp_encode;

RgbImage random_rgb(int64_t w, int64_t h, uint32_t seed) {
  std::mt19937 rng(seed);
  RgbImage img{w, h, std::vector<uint8_t>(size_t(w * h * 3))};
  for (auto& v : img.rgb) v = uint8_t(rng() & 0xff);
  return img;
}

// A smooth picture (JPEG keeps it close).
RgbImage gradient(int64_t w, int64_t h) {
  RgbImage img{w, h, std::vector<uint8_t>(size_t(w * h * 3))};
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x) {
      uint8_t* p = img.rgb.data() + (y * w + x) * 3;
      p[0] = uint8_t(x * 255 / (w - 1));
      p[1] = uint8_t(y * 255 / (h - 1));
      p[2] = 128;
    }
  return img;
}

std::string decode_error(const std::vector<uint8_t>& bytes, const ImageLimits& limits = {}) {
  try {
    image_decode(bytes, limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

uint32_t crc32(const uint8_t* p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return ~c;
}

void put_be32(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v >> 24), p[1] = uint8_t(v >> 16), p[2] = uint8_t(v >> 8), p[3] = uint8_t(v);
}

TEST(ImageDecode, PngRgbRgbaGrey) {
  const RgbImage rgb = random_rgb(37, 23, 1);
  RgbImage got = image_decode(png_encode(rgb.rgb, 37, 23, PNG_FORMAT_RGB));
  EXPECT_EQ(got.width, 37);
  EXPECT_EQ(got.height, 23);
  EXPECT_EQ(got.rgb, rgb.rgb);
  // RGBA: the alpha channel is dropped, the colour channels kept as stored.
  std::vector<uint8_t> rgba;
  for (size_t i = 0; i < rgb.rgb.size(); i += 3)
    rgba.insert(rgba.end(), {rgb.rgb[i], rgb.rgb[i + 1], rgb.rgb[i + 2], uint8_t(i % 256)});
  EXPECT_EQ(image_decode(png_encode(rgba, 37, 23, PNG_FORMAT_RGBA)).rgb, rgb.rgb);
  const std::vector<uint8_t> grey(37 * 23, 77);
  got = image_decode(png_encode(grey, 37, 23, PNG_FORMAT_GRAY));
  EXPECT_EQ(got.rgb, std::vector<uint8_t>(37 * 23 * 3, 77));
}

TEST(ImageDecode, Jpeg) {
  const RgbImage src = gradient(64, 40);
  const RgbImage got = image_decode(jpeg_encode(src, 95));
  ASSERT_EQ(got.width, 64);
  ASSERT_EQ(got.height, 40);
  double diff = 0;
  for (size_t i = 0; i < got.rgb.size(); ++i) diff += std::abs(int(got.rgb[i]) - int(src.rgb[i]));
  EXPECT_LT(diff / double(got.rgb.size()), 3.0);
}

// Lossless WebP gives the pixels back exactly; an alpha channel is dropped; lossy stays close.
TEST(ImageDecode, Webp) {
  const RgbImage src = random_rgb(37, 21, 7);
  const std::vector<uint8_t> lossless = webp_encode(src, /*lossless=*/true);
  const RgbImage got = image_decode(lossless);
  ASSERT_EQ(got.width, 37);
  ASSERT_EQ(got.height, 21);
  EXPECT_EQ(got.rgb, src.rgb);
  std::vector<uint8_t> rgba(size_t(37 * 21 * 4));
  for (size_t i = 0; i < size_t(37 * 21); ++i) {
    for (size_t c = 0; c < 3; ++c) rgba[4 * i + c] = src.rgb[3 * i + c];
    rgba[4 * i + 3] = uint8_t(1 + i * 7 % 254);  // never 0: the encoder may drop RGB under alpha 0
  }
  uint8_t* out = nullptr;
  const size_t n = WebPEncodeLosslessRGBA(rgba.data(), 37, 21, 37 * 4, &out);
  ASSERT_GT(n, 0u);
  const std::vector<uint8_t> with_alpha(out, out + n);
  WebPFree(out);
  EXPECT_EQ(image_decode(with_alpha).rgb, src.rgb);
  const RgbImage smooth = gradient(64, 40);
  const RgbImage lossy = image_decode(webp_encode(smooth, /*lossless=*/false));
  double diff = 0;
  for (size_t i = 0; i < lossy.rgb.size(); ++i)
    diff += std::abs(int(lossy.rgb[i]) - int(smooth.rgb[i]));
  EXPECT_LT(diff / double(lossy.rgb.size()), 3.0);
  // Truncated: refused naming WebP; a header claiming 16383 × 16383 is over the pixel limit.
  std::string msg = decode_error({lossless.begin(), lossless.begin() + long(lossless.size() / 2)});
  EXPECT_NE(msg.find("WebP"), std::string::npos) << msg;
  msg = decode_error(lossless, ImageLimits{.max_pixels = 100});
  EXPECT_NE(msg.find("exceeds"), std::string::npos) << msg;
}

TEST(ImageDecode, HostileFilesAreRefused) {
  const std::vector<uint8_t> png = png_encode(random_rgb(40, 30, 2).rgb, 40, 30, PNG_FORMAT_RGB);
  const std::vector<uint8_t> jpg = jpeg_encode(gradient(64, 48), 90);
  std::string msg = decode_error({png.begin(), png.begin() + long(png.size() / 2)});
  EXPECT_NE(msg.find("PNG"), std::string::npos) << msg;
  msg = decode_error({jpg.begin(), jpg.begin() + long(jpg.size() / 2)});
  EXPECT_NE(msg.find("JPEG"), std::string::npos) << msg;
  msg = decode_error({'G', 'I', 'F', '8', '9', 'a', 0, 0});
  EXPECT_NE(msg.find("not a PNG, JPEG or WebP"), std::string::npos) << msg;
  msg = decode_error(png, ImageLimits{.max_bytes = 100});
  EXPECT_NE(msg.find("bytes exceeds"), std::string::npos) << msg;

  // A PNG whose header claims 100 000 × 1 pixels (IHDR with a valid CRC, the same tiny data).
  std::vector<uint8_t> wide = png;
  put_be32(wide.data() + 16, 100000);
  put_be32(wide.data() + 20, 1);
  put_be32(wide.data() + 29, crc32(wide.data() + 12, 17));
  msg = decode_error(wide);
  EXPECT_NE(msg.find("100000 × 1 pixels exceeds the limit of 16384 per side"), std::string::npos)
      << msg;
  msg = decode_error(wide, ImageLimits{.max_side = 1 << 20});
  EXPECT_NE(msg.find("aspect ratio"), std::string::npos) << msg;

  // A JPEG whose frame header claims 60 000 × 60 000 pixels: refused before decompression.
  std::vector<uint8_t> big = jpg;
  size_t sof = 2;
  while (sof + 9 < big.size() &&
         !(big[sof] == 0xff && (big[sof + 1] == 0xc0 || big[sof + 1] == 0xc2)))
    ++sof;
  ASSERT_LT(sof + 9, big.size());
  big[sof + 5] = 0xea, big[sof + 6] = 0x60, big[sof + 7] = 0xea, big[sof + 8] = 0x60;
  msg = decode_error(big, ImageLimits{.max_side = 1 << 20});
  EXPECT_NE(msg.find("60000 × 60000 pixels exceeds the limit of"), std::string::npos) << msg;
}

// Every truncation and many single-byte corruptions of a valid PNG and JPEG either decode (to the
// size the header says, within the limits) or raise Error: no crash, no other exception (the
// sanitizer trees run this too).
TEST(ImageDecode, TruncatedAndCorruptedNeverCrash) {
  const std::vector<std::vector<uint8_t>> files = {
      png_encode(random_rgb(24, 16, 5).rgb, 24, 16, PNG_FORMAT_RGB),
      jpeg_encode(gradient(48, 32), 80), webp_encode(random_rgb(24, 16, 6), true),
      webp_encode(gradient(48, 32), false)};
  const ImageLimits limits{.max_pixels = 4096};
  int decoded = 0, refused = 0;
  auto attempt = [&](const std::vector<uint8_t>& bytes) {
    try {
      const RgbImage img = image_decode(bytes, limits);
      EXPECT_EQ(img.rgb.size(), size_t(img.width * img.height * 3));
      EXPECT_LE(img.width * img.height, limits.max_pixels);
      ++decoded;
    } catch (const Error&) {
      ++refused;
    }
  };
  std::mt19937 rng(9);
  for (const auto& f : files) {
    for (size_t n = 0; n < f.size(); n += 3) attempt({f.begin(), f.begin() + long(n)});
    for (int i = 0; i < 2000; ++i) {
      std::vector<uint8_t> bad = f;
      bad[rng() % bad.size()] ^= uint8_t(1 + rng() % 255);
      attempt(bad);
    }
  }
  std::printf("decoded %d, refused %d\n", decoded, refused);
  EXPECT_GT(refused, 0);
}

TEST(ImagePreprocess, SmartSize) {
  const int64_t lo = 8 * 1024, hi = 4096 * 1024;
  auto size = [&](int64_t w, int64_t h) { return image_smart_size(w, h, 32, lo, hi); };
  EXPECT_EQ(size(128, 96).width, 128);
  EXPECT_EQ(size(128, 96).height, 96);
  EXPECT_EQ(size(144, 96).width, 128);  // 4.5 rounds half to even (Python's round)
  EXPECT_EQ(size(112, 96).width, 128);  // 3.5 → 4
  EXPECT_EQ(size(20, 20).width, 96);    // under min_pixels: scaled up, ceiled
  EXPECT_EQ(size(20, 20).height, 96);
  const ImageSize big = size(4000, 3000);  // over max_pixels: scaled down, floored
  EXPECT_EQ(big.width, 2336);
  EXPECT_EQ(big.height, 1760);
  for (auto [w, h] : {std::pair<int64_t, int64_t>{1, 1}, {3000, 17}, {17, 3000}, {1234, 987}}) {
    const ImageSize s = size(w, h);
    EXPECT_EQ(s.width % 32, 0);
    EXPECT_EQ(s.height % 32, 0);
    EXPECT_LE(s.width * s.height, hi) << w << " x " << h;
  }
}

TEST(ImagePreprocess, ResizeAndNormalize) {
  const RgbImage src = random_rgb(5, 4, 3);
  EXPECT_EQ(image_resize_bilinear(src, {5, 4}).rgb, src.rgb);
  RgbImage two{2, 1, {0, 10, 255, 100, 21, 0}};
  const RgbImage three = image_resize_bilinear(two, {3, 1});
  EXPECT_EQ(std::vector<uint8_t>(three.rgb.begin() + 3, three.rgb.begin() + 6),
            (std::vector<uint8_t>{50, 15, 127}));  // midpoints, rounded toward zero
  VisionHparams hp;
  hp.image_mean = {0.5f, 0.25f, 0.0f};
  hp.image_std = {0.5f, 0.25f, 1.0f};
  const VisionImage n = image_normalize(two, hp);
  EXPECT_EQ(n.chw[0], -1.0f);                            // R of pixel 0: (0 − 0.5)/0.5
  EXPECT_EQ(n.chw[1], (100.0f / 255.0f - 0.5f) / 0.5f);  // R of pixel 1
  EXPECT_EQ(n.chw[2 * 2 + 0], 1.0f);                     // B of pixel 0: 255/255
}

TEST(ImagePreprocess, DecodedImageEncodes) {
  GgufWriter w;
  make_mmproj(MakeMmprojConfig{}, w);
  const std::string path = ::testing::TempDir() + "/image_test_mmproj.gguf";
  w.write(path);
  const auto m = vision_model_load(path);
  const RgbImage rgb =
      image_decode(png_encode(random_rgb(100, 70, 4).rgb, 100, 70, PNG_FORMAT_RGB));
  const VisionImage img = image_preprocess(rgb, m->hp);
  EXPECT_EQ(img.width, 128);  // 100 × 70 is under 8 tokens: scaled up to 128 × 96
  EXPECT_EQ(img.height, 96);
  ThreadPool one(1), two(2);
  const std::vector<float> a = vision_encode(*m, img, one), b = vision_encode(*m, img, two);
  EXPECT_EQ(int64_t(a.size()), 12 * 96);
  EXPECT_EQ(a, b);
  std::remove(path.c_str());
}

// The encoder cache keeps the most recently used outputs within its byte budget: a hit makes
// an entry recent, the least recent goes first, one entry over the budget is not kept, 0 keeps
// nothing.
TEST(EncodeCache, LeastRecentGoesFirstWithinTheBudget) {
  auto rows = [](size_t n, float v) { return std::make_shared<const std::vector<float>>(n, v); };
  EncodeCache c(40 * sizeof(float));
  c.put("a", rows(10, 1));
  c.put("b", rows(10, 2));
  c.put("c", rows(10, 3));
  ASSERT_TRUE(c.find("a"));  // a is now the most recent: b goes first
  c.put("d", rows(20, 4));
  EXPECT_EQ(c.bytes(), int64_t(40 * sizeof(float)));
  EXPECT_FALSE(c.find("b"));
  EXPECT_TRUE(c.find("c"));
  EXPECT_EQ((*c.find("a"))[0], 1.0f);
  EXPECT_EQ((*c.find("d"))[0], 4.0f);
  c.put("big", rows(41, 5));
  EXPECT_FALSE(c.find("big"));
  EXPECT_TRUE(c.find("a"));
  c.put("a", rows(5, 6));  // replaced, not added
  EXPECT_EQ(c.bytes(), int64_t(35 * sizeof(float)));
  EncodeCache off(0);
  off.put("a", rows(1, 1));
  EXPECT_FALSE(off.find("a"));
  EXPECT_EQ(off.bytes(), 0);
}

// The template's one pad per image widens to the image's rows, in order, each image starting at
// its first pad; the text between keeps its place. A prompt with another number of pads than
// images is an error that counts both.
TEST(SeqImagesPlace, EachPadWidensToItsImage) {
  constexpr int32_t P = 9;
  auto image = [](int64_t ny, int64_t nx) {
    SeqImage im;
    im.ny = ny;
    im.nx = nx;
    im.rows.assign(size_t(ny * nx), 0.0f);
    return im;
  };
  std::vector<int32_t> tokens = {1, P, 2, P, 3};
  const SeqImages s = seq_images_place(tokens, P, {image(1, 2), image(2, 2)});
  EXPECT_EQ(tokens, (std::vector<int32_t>{1, P, P, 2, P, P, P, P, 3}));
  ASSERT_EQ(s.images.size(), 2u);
  EXPECT_EQ(s.images[0].start, 1);
  EXPECT_EQ(s.images[1].start, 4);
  EXPECT_EQ(s.pad_id, P);
  s.check(tokens, 1);
  // Positions: text after the 1 × 2 image continues at 1 + 2; after the 2 × 2 at 4 + 2.
  EXPECT_EQ(s.rope_pos(3), (RopePos{3, 3, 3}));
  EXPECT_EQ(s.rope_pos(7), (RopePos{4, 5, 5}));
  EXPECT_EQ(s.rope_pos(8), (RopePos{6, 6, 6}));
  std::vector<int32_t> one_pad = {1, P, 2};
  try {
    seq_images_place(one_pad, P, {image(1, 1), image(1, 1)});
    ADD_FAILURE() << "two images placed on one pad";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1 <|image_pad|> tokens for 2 images"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(one_pad, (std::vector<int32_t>{1, P, 2})) << "a refused prompt was changed";
}

}  // namespace
}  // namespace invar
