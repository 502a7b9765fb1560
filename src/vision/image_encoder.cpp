#include "vision/image_encoder.h"

#include <chrono>
#include <string_view>

#include "core/error.h"
#include "core/sha256.h"
#include "vision/image_preprocess.h"

namespace invar {

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
}

EncodedImage ImageEncoder::encode(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  return encode(image_decode(bytes, limits));
}

EncodedImage ImageEncoder::encode(const RgbImage& rgb) {
  const VisionImage img = image_preprocess(rgb, m_->hp);
  EncodedImage out;
  const int64_t side = m_->hp.patch * m_->hp.merge;
  out.ny = img.height / side;
  out.nx = img.width / side;
  out.pixels_sha256 = sha256_hex(std::string_view(reinterpret_cast<const char*>(img.chw.data()),
                                                  img.chw.size() * sizeof(float)));
  // The rows are a pure function of (mmproj, pixels); the size is in the key as well, so that
  // two images whose pixel bytes agree but whose grids differ never share rows.
  const std::string key =
      out.pixels_sha256 + ":" + std::to_string(img.width) + "x" + std::to_string(img.height);
  if ((out.rows = cache_.find(key))) {
    out.cache_hit = true;
    hits_.fetch_add(1);
    return out;
  }
  auto rows = std::make_shared<std::vector<float>>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto t0 = std::chrono::steady_clock::now();
    vision_encode(*m_, img, pool_, buf_, *rows);
    out.encode_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  INVAR_CHECK(int64_t(rows->size()) == out.ny * out.nx * m_->hp.n_embd_out());
  encodes_.fetch_add(1);
  encode_us_.fetch_add(int64_t(out.encode_ms * 1000));
  out.rows = rows;
  cache_.put(key, std::move(rows));
  return out;
}

ImageEncoderStats ImageEncoder::stats() const {
  return {encodes_.load(), hits_.load(), double(encode_us_.load()) / 1e6, cache_.bytes()};
}

}  // namespace invar
