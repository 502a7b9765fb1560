// A loaded vision tower: the mmproj file's mapping, its hyper-parameters and bound weights.
#pragma once

#include <memory>
#include <string>

#include "gguf/gguf.h"
#include "kernels/rope.h"
#include "vision/mmproj_hparams.h"
#include "vision/mmproj_weights.h"

namespace invar {

struct VisionModel {
  std::unique_ptr<GgufFile> file;  // owns the mapping the matrices point into
  VisionHparams hp;
  VisionWeights w;
  Rope2d rope;  // [D/4] frequencies of the 2-D RoPE
};

// Opens and checks an mmproj GGUF (qwen3vl_merger). Throws GgufError whose message starts with
// the path and names the key or tensor at fault.
std::unique_ptr<VisionModel> vision_model_load(const std::string& path);
std::unique_ptr<VisionModel> vision_model_from_gguf(std::unique_ptr<GgufFile> file);

}  // namespace invar
