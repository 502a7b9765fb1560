// Model loading and the per-sequence state sizes (layouts in model.h).
#include "model/model.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/sha256.h"
#include "model/finite_scales.h"
#include "model/forward.h"
#include "model/sha256_cache.h"
#include "model/weights.h"

namespace invar {

Model::Model() = default;
Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::string& path, bool populate_now, bool huge_pages) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Model> m(new Model());
  m->file_ = GgufFile::open(path, populate_now, huge_pages);
  m->hp_ = hparams_from_gguf(*m->file_);
  m->w_ = std::make_unique<ModelWeights>(weights_bind(*m->file_, m->hp_));
  check_finite_scales(*m->file_);
  m->load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!populate_now && !huge_pages) {
    const GgufFile* f = m->file_.get();
    m->populate_ =
        std::async(std::launch::async, [f] {
          const auto p0 = std::chrono::steady_clock::now();
          f->populate();
          return std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count();
        }).share();
  }
  return m;
}

double Model::populate_wait() const {
  return populate_.valid() ? populate_.get() : 0.0;
}

void Model::sha256_start(const std::string& cache_dir) const {
  std::call_once(sha256_once_, [this, cache_dir] {
    const GgufFile* f = file_.get();
    const bool cached = !cache_dir.empty() && f->identity().ino != 0;
    if (cached) {
      if (auto hex = sha256_cache_find(cache_dir, f->identity())) {
        sha256_origin_ = "recorded in " + cache_dir + " for this file's inode, size and times";
        std::promise<std::string> p;
        p.set_value(*hex);
        sha256_ = p.get_future().share();
        return;
      }
    }
    sha256_ =
        std::async(std::launch::async, [this, f, cache_dir, cached] {
          const int64_t start_ns = realtime_ns();
          const auto t0 = std::chrono::steady_clock::now();
          std::string hex = sha256_hex(
              std::string_view(reinterpret_cast<const char*>(f->bytes()), size_t(f->file_size())));
          const double s =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          char buf[96];
          std::snprintf(buf, sizeof buf, "computed in %.2f s (%.2f GB/s)", s,
                        double(f->file_size()) / 1e9 / std::max(s, 1e-9));
          sha256_origin_ = buf;
          if (!cached) return hex;
          // Recorded only if the file is still the one that was mapped and hashed.
          const auto now = file_identity_of(f->path());
          const std::string why = now && *now == f->identity()
                                      ? sha256_cache_store(cache_dir, f->identity(), hex, start_ns)
                                      : "the file changed while it was hashed";
          sha256_origin_ += why.empty() ? ", recorded in " + cache_dir : ", not recorded: " + why;
          return hex;
        }).share();
  });
}

const std::string& Model::sha256() const {
  sha256_start();
  return sha256_.get();
}

const std::string& Model::sha256_origin() const {
  sha256();
  return sha256_origin_;
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
