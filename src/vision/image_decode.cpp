#include "vision/image_decode.h"

#include <cstring>
#include <fstream>

#include "core/error.h"

namespace invar {

void image_limits_check(int64_t width, int64_t height, const ImageLimits& limits) {
  const std::string size = std::to_string(width) + " × " + std::to_string(height);
  if (width <= 0 || height <= 0) throw Error("image: empty image (" + size + ")");
  if (width > limits.max_side || height > limits.max_side)
    throw Error("image: " + size + " pixels exceeds the limit of " +
                std::to_string(limits.max_side) + " per side");
  if (width * height > limits.max_pixels)
    throw Error("image: " + size + " pixels exceeds the limit of " +
                std::to_string(limits.max_pixels) + " pixels");
  const double lo = double(width < height ? width : height);
  const double hi = double(width < height ? height : width);
  if (hi > limits.max_aspect * lo)
    throw Error("image: " + size + " pixels: aspect ratio over " +
                std::to_string(int64_t(limits.max_aspect)) + ":1");
}

namespace {

enum class Format { png, jpeg, webp };

// The format by its signature, after the encoded size is checked. Throws Error.
Format format_of(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  if (int64_t(bytes.size()) > limits.max_bytes)
    throw Error("image: " + std::to_string(bytes.size()) + " bytes exceeds the limit of " +
                std::to_string(limits.max_bytes));
  static const uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  static const uint8_t kJpeg[3] = {0xff, 0xd8, 0xff};
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), kPng, 8) == 0) return Format::png;
  if (bytes.size() >= 3 && std::memcmp(bytes.data(), kJpeg, 3) == 0) return Format::jpeg;
  // RIFF, the file's size, WEBP.
  if (bytes.size() >= 12 && std::memcmp(bytes.data(), "RIFF", 4) == 0 &&
      std::memcmp(bytes.data() + 8, "WEBP", 4) == 0)
    return Format::webp;
  throw Error("image: not a PNG, JPEG or WebP file (unknown signature)");
}

}  // namespace

RgbImage image_decode(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  switch (format_of(bytes, limits)) {
    case Format::png:
      return image_decode_png(bytes, limits);
    case Format::jpeg:
      return image_decode_jpeg(bytes, limits);
    case Format::webp:
      return image_decode_webp(bytes, limits);
  }
  INVAR_CHECK(false, "image_decode: unknown format");
}

ImageDims image_dims(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  ImageDims d;
  switch (format_of(bytes, limits)) {
    case Format::png:
      d = image_dims_png(bytes);
      break;
    case Format::jpeg:
      d = image_dims_jpeg(bytes);
      break;
    case Format::webp:
      d = image_dims_webp(bytes);
      break;
  }
  image_limits_check(d.width, d.height, limits);
  return d;
}

RgbImage image_decode_file(const std::string& path, const ImageLimits& limits) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw Error("image: cannot open " + path);
  const std::streamoff size = in.tellg();
  if (size < 0 || int64_t(size) > limits.max_bytes)
    throw Error("image: " + path + " is larger than the limit of " +
                std::to_string(limits.max_bytes) + " bytes");
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), size);
  if (in.gcount() != size) throw Error("image: cannot read " + path);
  try {
    return image_decode(bytes, limits);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

}  // namespace invar
