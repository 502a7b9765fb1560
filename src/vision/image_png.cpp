// PNG through libpng's simplified API: the header is read first and the size checked against
// the limits before the pixel buffer exists, so the decoded size bounds the memory (a bomb's
// IDAT cannot inflate past width · height · 3 bytes). Truncated or corrupt streams fail
// png_image_finish_read with libpng's message.
#include <png.h>

#include <cstring>

#include "core/error.h"
#include "vision/image_decode.h"

namespace invar {

RgbImage image_decode_png(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&img, bytes.data(), bytes.size()))
    throw Error(std::string("image: PNG header: ") + img.message);
  const int64_t w = img.width, h = img.height;
  try {
    image_limits_check(w, h, limits);
  } catch (...) {
    png_image_free(&img);
    throw;
  }
  // An alpha channel is read and dropped, as PIL's convert("RGB") drops it (the colour channels
  // as stored, not composited on a background).
  const bool alpha = (img.format & PNG_FORMAT_FLAG_ALPHA) != 0;
  const int64_t channels = alpha ? 4 : 3;
  img.format = alpha ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB;
  std::vector<uint8_t> px(size_t(w * h * channels));
  if (!png_image_finish_read(&img, nullptr, px.data(), png_int_32(w * channels), nullptr)) {
    const std::string msg = img.message;
    png_image_free(&img);
    throw Error("image: PNG data: " + msg);
  }
  if (!alpha) return {w, h, std::move(px)};
  RgbImage out{w, h, std::vector<uint8_t>(size_t(w * h * 3))};
  for (int64_t i = 0; i < w * h; ++i)
    for (int64_t c = 0; c < 3; ++c) out.rgb[size_t(3 * i + c)] = px[size_t(4 * i + c)];
  return out;
}

// The IHDR chunk alone (PNG spec 11.2.2: it comes first, 13 bytes, width and height big-endian):
// libpng's reader would go on through every chunk before the first IDAT. The rest of the file
// is checked when it is decoded.
ImageDims image_dims_png(std::span<const uint8_t> bytes) {
  if (bytes.size() < 33 || std::memcmp(bytes.data() + 8, "\0\0\0\x0dIHDR", 8) != 0)
    throw Error("image: PNG header: no IHDR chunk first");
  const auto be32 = [&](size_t at) {
    return int64_t(bytes[at]) << 24 | int64_t(bytes[at + 1]) << 16 | int64_t(bytes[at + 2]) << 8 |
           int64_t(bytes[at + 3]);
  };
  return {be32(16), be32(20)};
}

}  // namespace invar
