// Where each patch of an image goes: the token order of the Qwen2-VL / Qwen3-VL vision tower,
// the patches' pixels, and their learned position embeddings interpolated to the image's grid.
//
// Tokens are ordered by 2 × 2 merge group: group (by, bx) in row-major order over the merged
// grid, and inside a group (dy, dx) = (0,0), (0,1), (1,0), (1,1) — patch (2by+dy, 2bx+dx). So the
// merger's 4 patches are 4 consecutive tokens (clip.cpp's permutes; HF's processor flattening).
#pragma once

#include <cstdint>
#include <vector>

#include "vision/mmproj_hparams.h"

namespace invar {

// Normalised pixels of one image, planar RGB: chw[3][height][width], (v/255 − mean)/std.
struct VisionImage {
  int64_t width = 0;  // pixels; a multiple of patch · merge
  int64_t height = 0;
  std::vector<float> chw;
};

struct PatchGrid {
  int64_t rows = 0, cols = 0;  // patches per column and per row: height/p, width/p
  std::vector<int64_t> y, x;   // [T] patch row and column of token t
  int64_t n_tokens() const { return rows * cols; }
};

// The grid of an image; throws Error when a side is not a positive multiple of p · merge.
PatchGrid patch_grid_of(const VisionHparams& hp, int64_t width, int64_t height);

// out[T][3p²]: token t's pixels in (channel, row, column) order, the order of the patch kernels.
void patch_grid_pixels(const VisionHparams& hp, const PatchGrid& g, const VisionImage& img,
                       float* out);

// out[T][C] += the G × G position table bilinearly interpolated to rows × cols with aligned
// corners (HF fast_pos_embed_interpolate: source row i·(G−1)/(rows−1), likewise columns; clip.cpp
// GGML_SCALE_MODE_BILINEAR | GGML_SCALE_FLAG_ALIGN_CORNERS), in token order.
void patch_grid_add_pos(const VisionHparams& hp, const PatchGrid& g,
                        const std::vector<float>& table, float* out);

}  // namespace invar
