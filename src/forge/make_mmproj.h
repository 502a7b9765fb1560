// Random-weight vision towers in llama.cpp's mmproj layout (projector qwen3vl_merger): the keys,
// tensor names and shapes conversion/qwen3vl.py writes for a Qwen3-VL / Qwen3.5 checkpoint, every
// weight drawn from make_model's counter-based stream, so the file is the same bytes on every
// machine for a given seed. The projection width is the text model's n_embd.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "quant/dtype.h"

namespace invar {

struct MakeMmprojConfig {
  std::string name = "invar-random-vision";  // general.name
  int64_t n_embd = 64;                       // [C] ViT width
  int64_t n_ff = 128;                        // [F] ViT MLP width
  int64_t n_layer = 2;                       // [L] ViT blocks
  int64_t n_head = 4;                        // [H]; D = C/H, a multiple of 4
  int64_t n_out = 96;                        // [P] the text model's n_embd
  int64_t patch = 16;                        // [p] patch side in pixels
  int64_t pos_side = 4;                      // [G] learned position grid G × G
  std::vector<int64_t> deepstack;            // layers with a deepstack merger (Qwen3.5: none)
  // Weight type of the linear layers; the patch kernels are F16 when this is F16 and F32
  // otherwise (conversion/base.py tensor_force_quant), norms, biases and positions stay F32.
  DType type = DType::F32;
  uint64_t seed = 0;
};

// Throws invar::Error naming the field that is out of range.
void make_mmproj_validate(const MakeMmprojConfig& c);

// Writes the clip.* keys and every tensor into w.
void make_mmproj(const MakeMmprojConfig& c, GgufWriter& w);

}  // namespace invar
