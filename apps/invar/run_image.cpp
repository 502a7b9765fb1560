#include "run_image.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/error.h"
#include "core/sha256.h"
#include "core/thread_pool.h"
#include "vision/image_decode.h"
#include "vision/image_encoder.h"
#include "vision/image_preprocess.h"
#include "vision/vision_forward.h"

namespace invar::app {

int run_image(const std::string& mmproj, const std::string& image, int threads, bool json,
              const std::string& embeddings_out) {
  if (mmproj.empty()) throw Error("--image needs --mmproj FILE (the vision tower)");
  const auto m = vision_model_load(mmproj);
  const RgbImage rgb = image_decode_file(image);
  const VisionImage img = image_preprocess(rgb, m->hp);
  ThreadPool pool(threads);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<float> emb = vision_encode(*m, img, pool);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const int64_t width = m->hp.n_embd_out(), tokens = int64_t(emb.size()) / width;
  const std::string digest = sha256_hex(
      std::string_view(reinterpret_cast<const char*>(emb.data()), emb.size() * sizeof(float)));
  if (!embeddings_out.empty()) {
    std::ofstream f(embeddings_out, std::ios::binary);
    f.write(reinterpret_cast<const char*>(emb.data()), std::streamsize(emb.size() * sizeof(float)));
    if (!f) throw Error("--embeddings-out: cannot write " + embeddings_out);
  }
  if (json) {
    const nlohmann::json j = {{"image", image},
                              {"decoded", {rgb.width, rgb.height}},
                              {"encoded", {img.width, img.height}},
                              {"tokens", tokens},
                              {"embedding_width", width},
                              {"encode_ms", ms},
                              {"embeddings_sha256", digest}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf(
      "image %s: %lld x %lld pixels, encoded at %lld x %lld: %lld tokens x %lld, %.1f ms on %d "
      "threads\nembeddings sha256 %s\n",
      image.c_str(), static_cast<long long>(rgb.width), static_cast<long long>(rgb.height),
      static_cast<long long>(img.width), static_cast<long long>(img.height),
      static_cast<long long>(tokens), static_cast<long long>(width), ms, threads, digest.c_str());
  return 0;
}

ImagePrompt image_prompt(const std::string& mmproj, const std::string& image, const Model& model,
                         const Tokenizer& tok, std::vector<int32_t> tokens, int threads) {
  if (mmproj.empty()) throw Error("--image needs --mmproj FILE (the vision tower)");
  ImageEncoder enc(mmproj, model.hparams().n_embd, model.hparams().rope_imrope, threads,
                   /*cache_bytes=*/0);
  const int32_t pad = tok.token_id("<|image_pad|>");
  if (pad < 0) throw Error("the vocabulary has no <|image_pad|> token");
  if (const auto n = std::count(tokens.begin(), tokens.end(), pad); n != 1)
    throw Error("the prompt holds " + std::to_string(n) +
                " <|image_pad|> tokens, not one where the image goes (with --chat the template "
                "must render an image part, as Qwen3.5's does)");
  const EncodedImage e = enc.encode(image_decode_file(image));
  SeqImage one;
  one.ny = e.ny;
  one.nx = e.nx;
  one.rows = *e.rows;
  one.pixels_sha256 = e.pixels_sha256;
  ImagePrompt out;
  out.encode_ms = e.encode_ms;
  std::vector<SeqImage> images;
  images.push_back(std::move(one));
  out.images = std::make_shared<SeqImages>(seq_images_place(tokens, pad, std::move(images)));
  out.tokens = std::move(tokens);
  return out;
}

}  // namespace invar::app
