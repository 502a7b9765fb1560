// PNG, JPEG and WebP files made in memory for the tests that send or decode images (libpng's
// simplified API, libjpeg-turbo), so that no test carries binary fixtures.
#pragma once

#include <gtest/gtest.h>
#include <jpeglib.h>
#include <png.h>
#include <webp/encode.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "vision/image_decode.h"

namespace invar::test {

// px: rows of `format`'s pixels (PNG_FORMAT_RGB, _RGBA, _GRAY, ...).
inline std::vector<uint8_t> png_encode(const std::vector<uint8_t>& px, int64_t w, int64_t h,
                                       uint32_t format) {
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  img.width = png_uint_32(w);
  img.height = png_uint_32(h);
  img.format = format;
  png_alloc_size_t size = 0;
  EXPECT_TRUE(png_image_write_to_memory(&img, nullptr, &size, 0, px.data(), 0, nullptr));
  std::vector<uint8_t> out(size);
  EXPECT_TRUE(png_image_write_to_memory(&img, out.data(), &size, 0, px.data(), 0, nullptr));
  out.resize(size);
  return out;
}

inline std::vector<uint8_t> jpeg_encode(const RgbImage& img, int quality) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = JDIMENSION(img.width);
  c.image_height = JDIMENSION(img.height);
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(img.rgb.data()) + size_t(c.next_scanline) * img.width * 3;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  std::vector<uint8_t> out(buf, buf + size);
  jpeg_destroy_compress(&c);
  std::free(buf);
  return out;
}

// WebP through libwebp's simple encoder: lossless (the pixels exactly) or lossy at quality 90.
inline std::vector<uint8_t> webp_encode(const RgbImage& img, bool lossless) {
  uint8_t* buf = nullptr;
  const int w = int(img.width), h = int(img.height);
  const size_t n = lossless ? WebPEncodeLosslessRGB(img.rgb.data(), w, h, w * 3, &buf)
                            : WebPEncodeRGB(img.rgb.data(), w, h, w * 3, 90.0f, &buf);
  EXPECT_GT(n, 0u);
  std::vector<uint8_t> out(buf, buf + n);
  WebPFree(buf);
  return out;
}

}  // namespace invar::test
