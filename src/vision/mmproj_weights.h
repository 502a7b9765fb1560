// The tensors of a qwen3vl_merger mmproj, bound in place over the GGUF mapping (matrices) or
// widened to F32 (vectors). Names and shapes are llama.cpp's (tools/mtmd/clip-impl.h TN_*,
// written by conversion/qwen3vl.py); shapes below are ggml order {ne0, ne1, ...}.
#pragma once

#include <memory>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "vision/mmproj_hparams.h"

namespace invar {

struct VisionLayerWeights {
  std::vector<float> ln1_w, ln1_b;  // [C]                   v.blk.<l>.ln1.{weight,bias}
  Matrix qkv;                       // {C, 3C}: q, k, v rows  v.blk.<l>.attn_qkv.weight
  std::vector<float> qkv_b;         // [3C]
  Matrix out;                       // {C, C}                 v.blk.<l>.attn_out.weight
  std::vector<float> out_b;         // [C]
  std::vector<float> ln2_w, ln2_b;  // [C]                   v.blk.<l>.ln2.{weight,bias}
  Matrix up;                        // {C, F}                 v.blk.<l>.ffn_up.weight
  std::vector<float> up_b;          // [F]
  Matrix down;                      // {F, C}                 v.blk.<l>.ffn_down.weight
  std::vector<float> down_b;        // [C]
  // Deepstack merger of this layer (HF deepstack_merger_list), present when hp.deepstack[l].
  std::vector<float> ds_norm_w, ds_norm_b;  // [4C]          v.deepstack.<l>.norm.{weight,bias}
  Matrix ds_fc1;                            // {4C, 4C}      v.deepstack.<l>.fc1.weight
  std::vector<float> ds_fc1_b;              // [4C]
  Matrix ds_fc2;                            // {4C, P}       v.deepstack.<l>.fc2.weight
  std::vector<float> ds_fc2_b;              // [P]
};

struct VisionWeights {
  // The Conv3D patch embedding split in time (temporal patch 2): frame 0 and frame 1 kernels,
  // each {p, p, 3, C} in the file, used as {3p², C} matrices over a patch's pixels in (channel,
  // row, column) order.
  Matrix patch0;                // v.patch_embd.weight
  Matrix patch1;                // v.patch_embd.weight.1
  std::vector<float> patch_b;   // [C]       v.patch_embd.bias
  std::vector<float> pos_embd;  // [G²][C]   v.position_embd.weight, row = grid row·G + column
  std::vector<VisionLayerWeights> layers;   // [L]
  std::vector<float> post_ln_w, post_ln_b;  // [C]  v.post_ln: the merger's per-patch LayerNorm
  Matrix mm0;                               // {4C, 4C}  mm.0.weight (merger linear_fc1)
  std::vector<float> mm0_b;                 // [4C]
  Matrix mm2;                               // {4C, P}   mm.2.weight (merger linear_fc2)
  std::vector<float> mm2_b;                 // [P]
};

// Binds every tensor; a missing tensor, a wrong shape or type, or a tensor that is not part of a
// qwen3vl_merger mmproj is a GgufError naming it.
VisionWeights vision_weights_bind(const GgufFile& f, const VisionHparams& hp);

}  // namespace invar
