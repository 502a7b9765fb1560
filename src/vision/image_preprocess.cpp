#include "vision/image_preprocess.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace invar {

ImageSize image_smart_size(int64_t width, int64_t height, int64_t factor, int64_t min_pixels,
                           int64_t max_pixels) {
  INVAR_CHECK(width > 0 && height > 0 && factor > 0 && min_pixels <= max_pixels,
              "image_smart_size: bad arguments");
  const double f = double(factor), w = double(width), h = double(height);
  // nearbyint rounds half to even in the default rounding mode, as Python's round().
  int64_t hb = std::max(factor, int64_t(std::nearbyint(h / f)) * factor);
  int64_t wb = std::max(factor, int64_t(std::nearbyint(w / f)) * factor);
  if (hb * wb > max_pixels) {
    const double beta = std::sqrt(h * w / double(max_pixels));
    hb = std::max(factor, int64_t(std::floor(h / beta / f)) * factor);
    wb = std::max(factor, int64_t(std::floor(w / beta / f)) * factor);
  } else if (hb * wb < min_pixels) {
    const double beta = std::sqrt(double(min_pixels) / (h * w));
    hb = int64_t(std::ceil(h * beta / f)) * factor;
    wb = int64_t(std::ceil(w * beta / f)) * factor;
  }
  return {wb, hb};
}

PixelBudget image_pixel_budget(const VisionHparams& hp) {
  const int64_t token = (hp.patch * hp.merge) * (hp.patch * hp.merge);
  return {hp.min_pixels > 0 ? hp.min_pixels : 8 * token,
          hp.max_pixels > 0 ? hp.max_pixels : 4096 * token};
}

RgbImage image_resize_bilinear(const RgbImage& src, ImageSize to) {
  INVAR_CHECK(src.width > 0 && src.height > 0 && to.width > 0 && to.height > 0,
              "image_resize_bilinear: empty image");
  RgbImage dst{to.width, to.height, std::vector<uint8_t>(size_t(to.width * to.height * 3))};
  const float xr = to.width > 1 ? float(src.width - 1) / float(to.width - 1) : 0.0f;
  const float yr = to.height > 1 ? float(src.height - 1) / float(to.height - 1) : 0.0f;
  auto lerp = [](float a, float b, float t) { return a + (b - a) * t; };
  for (int64_t y = 0; y < to.height; ++y) {
    const float py = float(y) * yr;
    const int64_t y0 = std::min(int64_t(py), src.height - 1);
    const int64_t y1 = std::min(y0 + 1, src.height - 1);
    const float fy = py - float(y0);
    for (int64_t x = 0; x < to.width; ++x) {
      const float px = float(x) * xr;
      const int64_t x0 = std::min(int64_t(px), src.width - 1);
      const int64_t x1 = std::min(x0 + 1, src.width - 1);
      const float fx = px - float(x0);
      const uint8_t* p00 = src.rgb.data() + (y0 * src.width + x0) * 3;
      const uint8_t* p01 = src.rgb.data() + (y0 * src.width + x1) * 3;
      const uint8_t* p10 = src.rgb.data() + (y1 * src.width + x0) * 3;
      const uint8_t* p11 = src.rgb.data() + (y1 * src.width + x1) * 3;
      uint8_t* o = dst.rgb.data() + (y * to.width + x) * 3;
      for (int c = 0; c < 3; ++c) {
        const float top = lerp(float(p00[c]), float(p01[c]), fx);
        const float bottom = lerp(float(p10[c]), float(p11[c]), fx);
        o[c] = uint8_t(lerp(top, bottom, fy));
      }
    }
  }
  return dst;
}

VisionImage image_normalize(const RgbImage& src, const VisionHparams& hp) {
  const int64_t n = src.width * src.height;
  VisionImage img{src.width, src.height, std::vector<float>(size_t(3 * n))};
  for (int64_t c = 0; c < 3; ++c) {
    const float mean = hp.image_mean[size_t(c)], sd = hp.image_std[size_t(c)];
    float* plane = img.chw.data() + c * n;
    for (int64_t i = 0; i < n; ++i)
      plane[i] = (float(src.rgb[size_t(3 * i + c)]) / 255.0f - mean) / sd;
  }
  return img;
}

VisionImage image_preprocess(const RgbImage& src, const VisionHparams& hp) {
  const PixelBudget b = image_pixel_budget(hp);
  const ImageSize to =
      image_smart_size(src.width, src.height, hp.patch * hp.merge, b.min_pixels, b.max_pixels);
  if (to.width == src.width && to.height == src.height) return image_normalize(src, hp);
  return image_normalize(image_resize_bilinear(src, to), hp);
}

}  // namespace invar
