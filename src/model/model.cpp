// Model loading and the per-sequence state sizes (layouts in model.h).
#include "model/model.h"

#include <chrono>

#include "core/sha256.h"
#include "model/forward.h"
#include "model/weights.h"

namespace invar {

Model::Model() = default;
Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::string& path) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Model> m(new Model());
  m->file_ = GgufFile::open(path);
  m->hp_ = hparams_from_gguf(*m->file_);
  m->w_ = std::make_unique<ModelWeights>(weights_bind(*m->file_, m->hp_));
  m->load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

void Model::sha256_start() const {
  std::call_once(sha256_once_, [this] {
    const GgufFile* f = file_.get();
    sha256_ = std::async(std::launch::async, [f] {
                return sha256_hex(std::string_view(reinterpret_cast<const char*>(f->bytes()),
                                                   size_t(f->file_size())));
              }).share();
  });
}

const std::string& Model::sha256() const {
  sha256_start();
  return sha256_.get();
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
