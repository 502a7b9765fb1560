#include "vision/vision_model.h"

namespace invar {

std::unique_ptr<VisionModel> vision_model_from_gguf(std::unique_ptr<GgufFile> file) {
  auto m = std::make_unique<VisionModel>();
  m->hp = vision_hparams_from_gguf(*file);
  m->w = vision_weights_bind(*file, m->hp);
  m->rope = rope_2d_build(m->hp.head_dim, m->hp.rope_base);
  m->file = std::move(file);
  return m;
}

std::unique_ptr<VisionModel> vision_model_load(const std::string& path) {
  std::unique_ptr<GgufFile> file = GgufFile::open(path);
  try {
    return vision_model_from_gguf(std::move(file));
  } catch (const GgufError& e) {
    throw GgufError("mmproj " + path + ": " + e.what());
  }
}

}  // namespace invar
