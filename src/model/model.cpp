// Model loading and the per-sequence state sizes (layouts in model.h).
#include "model/model.h"

#include "core/sha256.h"
#include "model/forward.h"
#include "model/weights.h"

namespace invar {

Model::Model() = default;
Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::string& path) {
  std::unique_ptr<Model> m(new Model());
  m->file_ = GgufFile::open(path);
  m->hp_ = hparams_from_gguf(*m->file_);
  m->w_ = std::make_unique<ModelWeights>(weights_bind(*m->file_, m->hp_));
  return m;
}

const std::string& Model::sha256() const {
  // Engines sharing the model may ask at once: hash the file exactly once.
  std::call_once(sha256_once_, [this] {
    sha256_ = sha256_hex(std::string_view(reinterpret_cast<const char*>(file_->bytes()),
                                          size_t(file_->file_size())));
  });
  return sha256_;
}

int64_t Model::state_floats() const {
  return hp_.n_recurrent_layers() * gdn_state_floats(hp_);
}

int64_t Model::kv_floats_per_token() const {
  return hp_.n_attention_layers() * 2 * hp_.n_head_kv * hp_.head_dim;
}

int64_t Model::mtp_kv_block_floats(int64_t block_size) const {
  return 2 * block_size * hp_.n_head_kv * hp_.head_dim;
}

int64_t Model::kv_block_floats(int64_t block_size) const {
  return kv_floats_per_token() * block_size;
}

}  // namespace invar
