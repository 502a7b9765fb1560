// WebP (lossy and lossless, the still image of an animated file's first frame excluded: animated
// files are refused) through Debian's libwebp. The header gives the size, checked against the
// limits before the pixel buffer exists; WebPDecodeRGBInto then writes into that buffer and no
// other, so the decoded size bounds the memory. An alpha channel is dropped (MODE_RGB: the colour
// channels as stored, as PIL's convert("RGB")).
#include <webp/decode.h>

#include "core/error.h"
#include "vision/image_decode.h"

namespace invar {

namespace {

WebPBitstreamFeatures features_of(std::span<const uint8_t> bytes) {
  WebPBitstreamFeatures f;
  const VP8StatusCode st = WebPGetFeatures(bytes.data(), bytes.size(), &f);
  if (st != VP8_STATUS_OK)
    throw Error("image: WebP header: " + std::string(st == VP8_STATUS_NOT_ENOUGH_DATA
                                                         ? "truncated"
                                                         : "not a valid WebP bitstream"));
  if (f.has_animation) throw Error("image: animated WebP is not supported (send one frame)");
  return f;
}

}  // namespace

ImageDims image_dims_webp(std::span<const uint8_t> bytes) {
  const WebPBitstreamFeatures f = features_of(bytes);
  return {f.width, f.height};
}

RgbImage image_decode_webp(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  const WebPBitstreamFeatures f = features_of(bytes);
  const int64_t w = f.width, h = f.height;
  image_limits_check(w, h, limits);
  RgbImage out{w, h, std::vector<uint8_t>(size_t(w * h * 3))};
  if (!WebPDecodeRGBInto(bytes.data(), bytes.size(), out.rgb.data(), out.rgb.size(), int(w * 3)))
    throw Error("image: WebP data: truncated or corrupt");
  return out;
}

}  // namespace invar
