#include "vision/image_encoder.h"

#include <pthread.h>
#include <time.h>

#include <chrono>
#include <optional>
#include <string_view>

#include "core/error.h"
#include "core/sha256.h"
#include "vision/image_preprocess.h"

namespace invar {
namespace {

double clock_seconds(clockid_t c) {
  timespec ts{};
  clock_gettime(c, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

}  // namespace

ImageEncoder::ImageEncoder(const std::string& mmproj, int64_t lm_embd, bool lm_imrope, int threads,
                           int64_t cache_bytes)
    : path_(mmproj), m_(vision_model_load(mmproj)), pool_(threads), cache_(cache_bytes) {
  if (m_->hp.n_deepstack > 0)
    throw Error(mmproj + ": " + std::to_string(m_->hp.n_deepstack) +
                " deepstack mergers (Qwen3-VL); the language model reads mmprojs without them "
                "(Qwen3.5)");
  if (m_->hp.n_out != lm_embd)
    throw Error(mmproj + ": projection width " + std::to_string(m_->hp.n_out) +
                " (clip.vision.projection_dim), the model's embedding width is " +
                std::to_string(lm_embd) + ": this tower belongs to another model");
  if (!lm_imrope)
    throw Error("the model has no IMROPE positions (qwen3next): it reads no images; " + mmproj +
                " needs a qwen35 or qwen35moe model");
  // The tower's CPU is counted against a request's budget on every thread that runs it: each
  // worker names its own clock once (parallel_for gives thread i the unit i, and the caller,
  // thread 0, is whichever thread encodes, counted on its own clock).
  worker_clocks_.assign(size_t(pool_.size()), clockid_t{});
  std::vector<int> named(size_t(pool_.size()), 0);
  pool_.parallel_for(
      pool_.size(),
      [&](int64_t, int64_t, int t) {
        if (t > 0)
          named[size_t(t)] = pthread_getcpuclockid(pthread_self(), &worker_clocks_[size_t(t)]) == 0;
      },
      1);
  for (int t = 1; t < pool_.size(); ++t)
    INVAR_CHECK(named[size_t(t)],
                "image encoder: worker " + std::to_string(t) + " has no CPU clock");
  worker_clocks_.erase(worker_clocks_.begin());
}

double ImageEncoder::pool_cpu_seconds() const {
  double s = 0;
  for (clockid_t c : worker_clocks_) s += clock_seconds(c);
  return s;
}

std::pair<int64_t, int64_t> ImageEncoder::grid_of(std::span<const uint8_t> bytes,
                                                  const ImageLimits& limits) const {
  const ImageDims d = image_dims(bytes, limits);
  const PixelBudget b = image_pixel_budget(m_->hp);
  const int64_t side = m_->hp.patch * m_->hp.merge;
  const ImageSize to = image_smart_size(d.width, d.height, side, b.min_pixels, b.max_pixels);
  return {to.height / side, to.width / side};
}

EncodedImage ImageEncoder::encode(std::span<const uint8_t> bytes, const ImageLimits& limits,
                                  const EncodeBounds& bounds) {
  const double own0 = clock_seconds(CLOCK_THREAD_CPUTIME_ID);
  return encode_since(image_decode(bytes, limits), bounds, own0);
}

EncodedImage ImageEncoder::encode(const RgbImage& rgb, const EncodeBounds& bounds) {
  return encode_since(rgb, bounds, clock_seconds(CLOCK_THREAD_CPUTIME_ID));
}

EncodedImage ImageEncoder::encode_since(const RgbImage& rgb, const EncodeBounds& bounds,
                                        double own0) {
  const VisionImage img = image_preprocess(rgb, m_->hp);
  EncodedImage out;
  const int64_t side = m_->hp.patch * m_->hp.merge;
  out.ny = img.height / side;
  out.nx = img.width / side;
  out.pixels_sha256 = sha256_hex(std::string_view(reinterpret_cast<const char*>(img.chw.data()),
                                                  img.chw.size() * sizeof(float)));
  // The rows are a pure function of (mmproj, pixels); the size is in the key as well, so that
  // two images whose pixel bytes agree but whose grids differ never share rows. The scope
  // (length-prefixed) keeps each tenant's entries its own.
  const std::string key = std::to_string(bounds.cache_scope.size()) + ":" + bounds.cache_scope +
                          ":" + out.pixels_sha256 + ":" + std::to_string(img.width) + "x" +
                          std::to_string(img.height);
  if ((out.rows = cache_.find(key))) {
    out.cache_hit = true;
    hits_.fetch_add(1);
    return out;
  }
  auto rows = std::make_shared<std::vector<float>>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    started_.fetch_add(1);
    const auto t0 = std::chrono::steady_clock::now();
    const double pool0 = pool_cpu_seconds();
    std::optional<EncodeStop> why;
    double used = 0;
    // Between the tower's units: the CPU from this call on (decoding and resizing on this
    // thread, the tower on every thread; the wait for the lock takes none).
    const auto stop = [&] {
      if (bounds.cancelled && bounds.cancelled->load(std::memory_order_relaxed))
        why = EncodeStop::cancelled;
      used = clock_seconds(CLOCK_THREAD_CPUTIME_ID) - own0 + pool_cpu_seconds() - pool0;
      if (!why && bounds.cpu_budget_s > 0 && used > bounds.cpu_budget_s)
        why = EncodeStop::cpu_budget;
      return why.has_value();
    };
    if (!vision_encode_until(*m_, img, pool_, buf_, *rows, stop)) {
      (*why == EncodeStop::cancelled ? cancelled_ : over_budget_).fetch_add(1);
      throw EncodeStopped(*why, used);
    }
    out.encode_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    out.pool_cpu_s = pool_cpu_seconds() - pool0;
  }
  INVAR_CHECK(int64_t(rows->size()) == out.ny * out.nx * m_->hp.n_embd_out());
  encodes_.fetch_add(1);
  encode_us_.fetch_add(int64_t(out.encode_ms * 1000));
  out.rows = rows;
  cache_.put(key, std::move(rows));
  return out;
}

ImageEncoderStats ImageEncoder::stats() const {
  return {encodes_.load(),    hits_.load(),    double(encode_us_.load()) / 1e6,
          cache_.bytes(),     started_.load(), cancelled_.load(),
          over_budget_.load()};
}

}  // namespace invar
