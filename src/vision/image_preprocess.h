// The Qwen2-VL / Qwen3-VL image processor: the size rule (HF smart_resize, llama.cpp
// calc_size_preserved_ratio), the resampling and the normalisation with the mmproj's mean/std.
#pragma once

#include <cstdint>

#include "vision/image_decode.h"
#include "vision/mmproj_hparams.h"
#include "vision/patch_grid.h"

namespace invar {

struct ImageSize {
  int64_t width = 0, height = 0;
};

// The size an image of width × height is resized to: each side rounded to a multiple of
// `factor` (half to even, as Python's round), then, if the area is over max_pixels (under
// min_pixels), both sides scaled by √(area/max) (√(min/area)) and floored (ceiled) to
// multiples of `factor`, never below `factor`. The aspect ratio is kept within a factor's step.
ImageSize image_smart_size(int64_t width, int64_t height, int64_t factor, int64_t min_pixels,
                           int64_t max_pixels);

struct PixelBudget {
  int64_t min_pixels = 0, max_pixels = 0;
};

// The pixel budget of a tower: clip.vision.image_{min,max}_pixels when the file has them, else
// llama.cpp's limits for qwen3vl_merger, 8 to 4096 merged tokens of (patch · merge)² pixels.
PixelBudget image_pixel_budget(const VisionHparams& hp);

// Bilinear resampling with aligned corners, each channel rounded toward zero to 8 bits
// (llama.cpp's resize_bilinear, the algorithm it uses for qwen3vl_merger).
RgbImage image_resize_bilinear(const RgbImage& src, ImageSize to);

// (v/255 − mean[c]) / std[c] per channel, interleaved RGB to planar.
VisionImage image_normalize(const RgbImage& src, const VisionHparams& hp);

// All three: the image the tower encodes.
VisionImage image_preprocess(const RgbImage& src, const VisionHparams& hp);

}  // namespace invar
