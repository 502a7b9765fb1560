// Hyper-parameters of a Qwen3-VL / Qwen3.5 vision tower, read from an mmproj GGUF in llama.cpp's
// layout (clip.* keys, projector type qwen3vl_merger) as tools/mtmd/clip.cpp reads them. Letters
// in brackets are the names vision_forward.cpp uses.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace invar {

struct VisionHparams {
  int64_t n_embd = 0;    // [C] ViT width                     clip.vision.embedding_length
  int64_t n_ff = 0;      // [F] ViT MLP width                 clip.vision.feed_forward_length
  int64_t n_layer = 0;   // [L] ViT blocks                    clip.vision.block_count
  int64_t n_head = 0;    // [H] attention heads               clip.vision.attention.head_count
  int64_t head_dim = 0;  // [D] = C / H (clip.vision.attention.head_dim when given)
  int64_t n_out = 0;     // [P] merger output = the text model's n_embd  clip.vision.projection_dim
  int64_t patch = 0;     // [p] patch side in pixels          clip.vision.patch_size
  int64_t merge = 2;     // [m] patches merged per side       clip.vision.spatial_merge_size
  int64_t image_size = 0;  // side of the pretraining image     clip.vision.image_size
  int64_t pos_side = 0;    // [G] side of the learned position grid (v.position_embd has G² rows)
  float eps = 1e-6f;       // every LayerNorm      clip.vision.attention.layer_norm_epsilon
  double rope_base = 10000.0;              // 2-D RoPE base (fixed in Qwen3-VL, not in the file)
  std::array<float, 3> image_mean{};       // per RGB channel           clip.vision.image_mean
  std::array<float, 3> image_std{};        // per RGB channel           clip.vision.image_std
  std::vector<uint8_t> deepstack;          // [L] 1 where the layer feeds a deepstack merger
  int64_t n_deepstack = 0;                 // layers with a deepstack merger
  int64_t min_pixels = 0, max_pixels = 0;  // clip.vision.image_{min,max}_pixels, 0 when absent

  // Width of one output token: the main merger's P, then P per deepstack merger.
  int64_t n_embd_out() const { return n_out * (1 + n_deepstack); }
};

// The projector type this loader models (clip.projector_type).
inline constexpr const char* kQwen3vlProjector = "qwen3vl_merger";

// Reads and checks the clip.* keys; the deepstack layers come from the tensors present
// (v.deepstack.<l>.*), as llama.cpp finds them. Throws GgufError naming the key or value.
VisionHparams vision_hparams_from_gguf(const GgufFile& f);

}  // namespace invar
