// Backend over the real model: GGUF → Model + Tokenizer (its vocabulary is in the same file)
// → Engine.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "cache/slot_arena.h"
#include "core/activations.h"
#include "core/error.h"
#include "server/fingerprint.h"
#include "server/vocab_backend.h"
#include "vision/image_encoder.h"

namespace invar::server {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string model_id_of(const std::string& path) {
  std::string base = path.substr(path.find_last_of('/') + 1);
  if (base.size() > 5 && base.ends_with(".gguf")) base.resize(base.size() - 5);
  return base;
}

class EngineBackend : public VocabBackend {
 public:
  EngineBackend(const std::string& path, EngineConfig cfg, BackendOptions opts) : opts_(opts) {
    const auto t0 = std::chrono::steady_clock::now();
    // The file's pages are mapped (read from the page cache, or from disk) by a thread of the
    // model's while the tokenizer and the engine are set up here; with --huge-pages they are
    // copied into 2 MiB pages first, before anything else starts.
    model_ = Model::load(path, /*populate_now=*/false, opts_.huge_pages);
    // The hash reads the whole file again at about 1.4 GB/s (SHA-NI), slower than mapping it:
    // it is taken from the cache when the file has not changed since it was recorded, and
    // otherwise runs beside the tokenizer set-up instead of after it.
    model_->sha256_start(opts_.sha256_cache_dir);
    const auto t_tok = std::chrono::steady_clock::now();
    vocab_set(std::make_unique<Tokenizer>(vocab_from_gguf(model_->gguf())), opts_);
    const double tokenizer_s = seconds_since(t_tok);
    for (const std::string& w : tok_->vocab().warnings)
      std::fprintf(stderr, "invar serve: warning: %s\n", w.c_str());
    if (tok_->n_vocab() > model_->hparams().n_vocab)
      throw Error("the vocabulary of " + path + " has " + std::to_string(tok_->n_vocab()) +
                  " tokens but the model only " + std::to_string(model_->hparams().n_vocab));
    id_ = model_id_of(path);
    // The numerics version of the profile this process runs (--activations): a q8 server never
    // claims the f32 profile's bits.
    fingerprint_ =
        system_fingerprint_of(model_->sha256(), numerics_version_of(activations_active()));
    cfg.fingerprint = fingerprint_;  // lower-tier records are filed under it
    if (!opts_.mmproj.empty()) vision_load(cfg.threads);
    const auto t_engine = std::chrono::steady_clock::now();
    engine_ = std::make_unique<Engine>(*model_, tok_.get(), cfg);
    const double engine_s = seconds_since(t_engine);
    const double populate_s = model_->populate_wait();  // ready means every weight is resident
    const double ready_s = seconds_since(t0);
    const double bytes = double(model_->gguf().file_size());
    const auto gbps = [bytes](double s) { return bytes / 1e9 / std::max(s, 1e-9); };
    std::fprintf(
        stderr,
        "invar serve: model %s: %.1f MiB %s in %.2f s, every page "
        "mapped in %.2f s (%.2f GB/s); ready in %.2f s (%.2f GB/s, tokenizer, engine and "
        "the file's SHA-256 included: tokenizer %.3f s, engine %.3f s)\n"
        "invar serve: model SHA-256 %s: %s\n",
        id_.c_str(), bytes / 1048576.0,
        opts_.huge_pages ? "copied into 2 MiB pages and bound" : "mapped and bound in place",
        model_->load_seconds(), populate_s, gbps(populate_s), ready_s, gbps(ready_s), tokenizer_s,
        engine_s, model_->sha256().c_str(), model_->sha256_origin().c_str());
    // What memory the engine may add to the model's: the cache budget, and the live recurrent
    // state of each running request, which the budget does not cover.
    const int64_t live_bytes = SlotArena::slot_bytes_for(model_->state_floats());
    std::fprintf(stderr, "invar serve: %s; live state %lld B per running request (up to %lld)\n",
                 engine_->cache_budget().describe().c_str(), static_cast<long long>(live_bytes),
                 static_cast<long long>(engine_->config().max_running));
    if (const std::string t = engine_->tiers_describe(); !t.empty())
      std::fprintf(stderr, "invar serve: %s\n", t.c_str());
  }
  ~EngineBackend() override { engine_.reset(); }  // the engine goes before the model

  std::string model_id() const override { return id_; }
  std::string system_fingerprint() const override { return fingerprint_; }
  int64_t n_ctx() const override { return engine_->n_ctx(); }
  RequestLimits request_limits() const override { return engine_->limits(); }
  RequestId submit(GenerationRequest req, EventSink sink) override {
    return engine_->submit(std::move(req), std::move(sink));
  }
  std::vector<RequestId> submit_group(std::vector<GenerationRequest> reqs,
                                      std::vector<EventSink> sinks) override {
    return engine_->submit_group(std::move(reqs), std::move(sinks));
  }
  int64_t max_running() const override { return engine_->config().max_running; }
  void cancel(RequestId id) override { engine_->cancel(id); }
  EngineMetrics metrics() const override { return engine_->metrics(); }
  void drain(double timeout_s) override { engine_->drain(timeout_s); }

  bool vision() const override { return encoder_ != nullptr; }
  int32_t image_pad_id() const override { return image_pad_; }
  PromptImages images_encode(std::span<const std::string> files,
                             const EncodeBounds& bounds) const override {
    if (!encoder_) return Backend::images_encode(files, bounds);
    PromptImages out;
    out.pad_id = image_pad_;
    for (const std::string& f : files) {
      EncodedImage e =
          encoder_->encode({reinterpret_cast<const uint8_t*>(f.data()), f.size()}, {}, bounds);
      SeqImage im;
      im.ny = e.ny;
      im.nx = e.nx;
      im.rows = *e.rows;
      im.pixels_sha256 = std::move(e.pixels_sha256);
      out.images.push_back(std::move(im));
      out.pool_cpu_s += e.pool_cpu_s;
    }
    return out;
  }
  int64_t image_tokens(const std::string& file) const override {
    if (!encoder_) return Backend::image_tokens(file);
    const auto [ny, nx] =
        encoder_->grid_of({reinterpret_cast<const uint8_t*>(file.data()), file.size()});
    return ny * nx;
  }
  ImageStats image_stats() const override {
    if (!encoder_) return {};
    const ImageEncoderStats s = encoder_->stats();
    return {s.encodes, s.cache_hits, s.encode_seconds, s.cache_bytes, opts_.image_cache_bytes,
            s.started, s.cancelled,  s.over_budget};
  }

 private:
  // The tower of --mmproj, checked against the model and its vocabulary. Throws Error.
  void vision_load(int threads) {
    const Hparams& hp = model_->hparams();
    if (!hp.rope_imrope)
      throw Error("--mmproj " + opts_.mmproj + ": the model is " + std::string(arch_name(hp.arch)) +
                  ", which reads no images (no IMROPE positions); a qwen35 or qwen35moe model "
                  "does");
    image_pad_ = tok_->token_id("<|image_pad|>");
    if (image_pad_ < 0)
      throw Error("--mmproj " + opts_.mmproj + ": the model's vocabulary has no <|image_pad|>");
    const auto t0 = std::chrono::steady_clock::now();
    encoder_ = std::make_unique<ImageEncoder>(
        opts_.mmproj, hp.n_embd, hp.rope_imrope,
        threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency())),
        opts_.image_cache_bytes);
    const VisionHparams& v = encoder_->hparams();
    std::fprintf(stderr,
                 "invar serve: vision tower %s: %lld blocks, width %lld, patch %lld, projection "
                 "%lld, loaded in %.2f s; encoder cache %lld bytes\n",
                 opts_.mmproj.c_str(), static_cast<long long>(v.n_layer),
                 static_cast<long long>(v.n_embd), static_cast<long long>(v.patch),
                 static_cast<long long>(v.n_out), seconds_since(t0),
                 static_cast<long long>(opts_.image_cache_bytes));
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ImageEncoder> encoder_;  // --mmproj; null: no vision
  int32_t image_pad_ = -1;
  BackendOptions opts_;
  std::string id_, fingerprint_;
};

}  // namespace

std::unique_ptr<Backend> engine_backend_load(const std::string& model_path, EngineConfig cfg,
                                             BackendOptions opts) {
  return std::make_unique<EngineBackend>(model_path, cfg, opts);
}

}  // namespace invar::server
