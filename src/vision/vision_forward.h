// The vision tower's forward pass (Qwen3-VL / Qwen3.5, llama.cpp tools/mtmd/models/qwen3vl.cpp,
// HF Qwen3VLVisionModel): one image in, its projected embeddings out.
//
//   X[T][3p²]  patches in merge-group order (patch_grid.h)
//   h = X·W0ᵀ + X·W1ᵀ + b + pos          Conv3D over the still image duplicated in time
//   per block l:  h += Wo·attn(rope2d(LN1(h)·Wqkvᵀ + b)) + bo      bidirectional, all T patches
//                 h += Wd·gelu_tanh(LN2(h)·Wuᵀ + bu) + bd
//                 deepstack layers: ds_l = fc2(gelu_erf(fc1(LN_4C(h viewed [T/4][4C]))))
//   out[T/4] = [ mm2(gelu_erf(mm0(LN_post(h) viewed [T/4][4C]))) | ds_l ... ]
//
// Every step is an invar kernel (canonical reductions, threads split outputs), so the result is
// a pure function of (file, pixels): the same bits for every thread count (rule N2).
#pragma once

#include <functional>
#include <vector>

#include "core/thread_pool.h"
#include "vision/patch_grid.h"
#include "vision/vision_model.h"

namespace invar {

// The activations of one encode, grown to the largest image seen and kept (STYLE 10): a caller
// that encodes many images passes the same buffers. Widths by vision_forward.cpp's letters.
struct VisionBuffers {
  int64_t capacity = 0;                              // patches [T] the buffers hold
  int threads = 0;                                   // pool size the kernel scratch holds
  std::vector<float> h, cur, qkv, heads, attn, tmp;  // [T][C] (cur: [T][max(C, 3p²)], qkv and
                                                     // heads: [T][3C])
  std::vector<float> ff;                             // [T][F]
  std::vector<float> merged, mid;                    // [T/4][4C]
  std::vector<float> y;                              // [T/4][P] one merger's output
  std::vector<float> scratch;                        // matmul and attention working memory
  void reserve(const VisionHparams& hp, int64_t patches, int n_threads);
};

// Embeddings out[T/4][hp.n_embd_out()] in row-major order of the merged grid. Throws Error when
// the image's sides are not multiples of patch · merge.
void vision_encode(const VisionModel& m, const VisionImage& img, ThreadPool& pool,
                   VisionBuffers& buf, std::vector<float>& out);

// Asked between the tower's units of work: before the patch embedding, before each block's
// attention and MLP halves, and before the merger (a tiny tower's unit is microseconds, Qwen3.5's
// at 1200 patches ~0.1 s). True stops the encode. No unit's arithmetic depends on it, so an encode
// that is never stopped has the bits of vision_encode.
using VisionStop = std::function<bool()>;

// vision_encode asking `stop` between units: false when it stopped (out then holds nothing of
// use).
bool vision_encode_until(const VisionModel& m, const VisionImage& img, ThreadPool& pool,
                         VisionBuffers& buf, std::vector<float>& out, const VisionStop& stop);
// The same with buffers for this call.
std::vector<float> vision_encode(const VisionModel& m, const VisionImage& img, ThreadPool& pool);

}  // namespace invar
