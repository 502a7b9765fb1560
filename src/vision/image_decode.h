// Encoded images (PNG, JPEG, WebP) to 8-bit RGB, through Debian's libpng, libjpeg-turbo and
// libwebp, with limits checked before any pixel buffer is allocated: a hostile file (a
// decompression bomb, a truncated stream, 100 000 × 1 pixels) is an Error naming what is wrong, in
// bounded memory and time.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace invar {

struct ImageLimits {
  int64_t max_bytes = int64_t(64) << 20;   // encoded size
  int64_t max_side = 16384;                // pixels per side, decoded
  int64_t max_pixels = int64_t(64) << 20;  // width · height, decoded (192 MiB of RGB at most)
  double max_aspect = 200.0;               // long side / short side (the HF processor's limit)
};

// Interleaved 8-bit RGB, rgb[height][width][3].
struct RgbImage {
  int64_t width = 0;
  int64_t height = 0;
  std::vector<uint8_t> rgb;
};

// Decodes a PNG, JPEG or WebP (told apart by their signatures); alpha is dropped (the colour
// channels as stored, as PIL's convert("RGB")), grey and palette images become RGB. Throws Error.
RgbImage image_decode(std::span<const uint8_t> bytes, const ImageLimits& limits = {});

// Reads and decodes a file (its size checked against limits.max_bytes first).
RgbImage image_decode_file(const std::string& path, const ImageLimits& limits = {});

// Checks a decoded size against the limits (throws Error naming the limit).
void image_limits_check(int64_t width, int64_t height, const ImageLimits& limits);

struct ImageDims {
  int64_t width = 0, height = 0;  // pixels, as image_decode would return them
};

// The decoded size from the header alone, no pixel decoded (microseconds, whatever the file):
// what the server counts an image's tokens from before it decodes or encodes anything. Checked
// against the limits; throws Error as image_decode does for a header it cannot read.
ImageDims image_dims(std::span<const uint8_t> bytes, const ImageLimits& limits = {});

// The decoders behind image_decode and their header readers, one file a format.
RgbImage image_decode_png(std::span<const uint8_t> bytes, const ImageLimits& limits);
RgbImage image_decode_jpeg(std::span<const uint8_t> bytes, const ImageLimits& limits);
RgbImage image_decode_webp(std::span<const uint8_t> bytes, const ImageLimits& limits);
ImageDims image_dims_png(std::span<const uint8_t> bytes);
ImageDims image_dims_jpeg(std::span<const uint8_t> bytes);
ImageDims image_dims_webp(std::span<const uint8_t> bytes);

}  // namespace invar
