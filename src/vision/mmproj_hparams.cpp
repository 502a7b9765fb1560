// clip.* keys of a qwen3vl_merger mmproj (llama.cpp tools/mtmd/clip.cpp load_hparams; the
// converter is conversion/qwen3vl.py, Qwen3VLVisionModel).
#include "vision/mmproj_hparams.h"

#include <cmath>
#include <string>

namespace invar {
namespace {

std::string deepstack_norm_name(int64_t l) {
  return "v.deepstack." + std::to_string(l) + ".norm.weight";
}

// Sizes past these are not a vision tower but a hostile or broken file: refused before anything
// is allocated from them (published towers: C 1152, F 4304, 27 blocks, patch 16).
constexpr int64_t kMaxWidth = int64_t(1) << 16;
constexpr int64_t kMaxBlocks = 1024;

int64_t positive(const GgufFile& f, const std::string& key, int64_t max = kMaxWidth) {
  const int64_t v = f.get_int(key);
  if (v <= 0 || v > max)
    throw GgufError("gguf: " + key + " must be in 1.." + std::to_string(max) + ", not " +
                    std::to_string(v));
  return v;
}

std::array<float, 3> rgb(const GgufFile& f, const std::string& key) {
  const std::vector<double> v = f.get_float_array(key);
  if (v.size() < 3)
    throw GgufError("gguf: " + key + " must hold 3 values (R, G, B), not " +
                    std::to_string(v.size()));
  return {float(v[0]), float(v[1]), float(v[2])};
}

}  // namespace

VisionHparams vision_hparams_from_gguf(const GgufFile& f) {
  const std::string arch = f.get_string("general.architecture");
  if (arch != "clip")
    throw GgufError("gguf: general.architecture is '" + arch + "', an mmproj file has 'clip'");
  if (!f.get_bool_or("clip.has_vision_encoder", false))
    throw GgufError("gguf: clip.has_vision_encoder is not true: no vision tower in this mmproj");
  std::string proj = f.get_string_or("clip.projector_type", "");
  if (proj.empty()) proj = f.get_string_or("clip.vision.projector_type", "");
  if (proj != kQwen3vlProjector)
    throw GgufError("gguf: clip.projector_type is '" + proj + "'; only '" + kQwen3vlProjector +
                    "' (Qwen3-VL / Qwen3.5 vision) is supported");
  // The ViT MLP is gelu_pytorch_tanh; llama.cpp takes that from this flag (gelu_quick without it).
  if (!f.get_bool_or("clip.use_gelu", false))
    throw GgufError("gguf: clip.use_gelu must be true for " + std::string(kQwen3vlProjector));
  if (f.get_bool_or("clip.use_silu", false))
    throw GgufError("gguf: clip.use_silu must not be set for " + std::string(kQwen3vlProjector));

  VisionHparams hp;
  hp.n_embd = positive(f, "clip.vision.embedding_length");
  hp.n_ff = positive(f, "clip.vision.feed_forward_length");
  hp.n_layer = positive(f, "clip.vision.block_count", kMaxBlocks);
  hp.n_head = positive(f, "clip.vision.attention.head_count");
  hp.n_out = positive(f, "clip.vision.projection_dim");
  hp.patch = positive(f, "clip.vision.patch_size", 256);
  hp.image_size = positive(f, "clip.vision.image_size");
  hp.merge = f.get_int_or("clip.vision.spatial_merge_size", 2);
  hp.eps = float(f.get_float("clip.vision.attention.layer_norm_epsilon"));
  hp.image_mean = rgb(f, "clip.vision.image_mean");
  hp.image_std = rgb(f, "clip.vision.image_std");
  hp.min_pixels = f.get_int_or("clip.vision.image_min_pixels", 0);
  hp.max_pixels = f.get_int_or("clip.vision.image_max_pixels", 0);

  if (hp.n_embd % hp.n_head != 0)
    throw GgufError("gguf: clip.vision.embedding_length " + std::to_string(hp.n_embd) +
                    " is not a multiple of clip.vision.attention.head_count " +
                    std::to_string(hp.n_head));
  hp.head_dim = f.get_int_or("clip.vision.attention.head_dim", hp.n_embd / hp.n_head);
  if (hp.head_dim * hp.n_head != hp.n_embd || hp.head_dim % 4 != 0)
    throw GgufError("gguf: vision head dim " + std::to_string(hp.head_dim) +
                    " must be embedding_length / head_count and a multiple of 4 (2-D RoPE)");
  // The merge order and 2-D positions of clip.cpp (and HF) are written for 2 × 2.
  if (hp.merge != 2)
    throw GgufError("gguf: clip.vision.spatial_merge_size is " + std::to_string(hp.merge) +
                    "; qwen3vl_merger merges 2 × 2 patches");
  if (!(hp.eps > 0.0f) || hp.eps > 1.0f)
    throw GgufError("gguf: clip.vision.attention.layer_norm_epsilon " + std::to_string(hp.eps) +
                    " is not in (0, 1]");
  for (int c = 0; c < 3; ++c)
    if (!(hp.image_std[size_t(c)] > 0.0f))
      throw GgufError("gguf: clip.vision.image_std must be positive");

  const GgufTensorInfo* pos = f.find_tensor("v.position_embd.weight");
  if (!pos) throw GgufError("gguf: missing tensor 'v.position_embd.weight'");
  const int64_t n_pos = pos->ne.size() >= 2 ? pos->ne[1] : 0;
  int64_t side =
      n_pos > 0 && n_pos <= kMaxWidth * kMaxWidth ? int64_t(std::sqrt(double(n_pos))) : 0;
  while (side > 0 && side * side > n_pos) --side;
  while ((side + 1) * (side + 1) <= n_pos) ++side;
  if (side == 0 || side * side != n_pos)
    throw GgufError("gguf: tensor 'v.position_embd.weight' has " + std::to_string(n_pos) +
                    " rows, not a square grid of positions");
  hp.pos_side = side;

  hp.deepstack.assign(size_t(hp.n_layer), 0);
  for (int64_t l = 0; l < hp.n_layer; ++l)
    if (f.find_tensor(deepstack_norm_name(l))) {
      hp.deepstack[size_t(l)] = 1;
      ++hp.n_deepstack;
    }
  if (f.find("clip.vision.is_deepstack_layers")) {
    const std::vector<int64_t> flags = f.get_int_array("clip.vision.is_deepstack_layers");
    for (int64_t l = 0; l < hp.n_layer; ++l) {
      const bool flag = size_t(l) < flags.size() && flags[size_t(l)] != 0;
      if (flag != bool(hp.deepstack[size_t(l)]))
        throw GgufError("gguf: clip.vision.is_deepstack_layers[" + std::to_string(l) + "] is " +
                        (flag ? "true" : "false") + " but tensor '" + deepstack_norm_name(l) +
                        "' is " + (flag ? "missing" : "present"));
    }
  }
  return hp;
}

}  // namespace invar
