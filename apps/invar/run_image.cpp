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
  const auto m = vision_model_load(mmproj);
  const int64_t E = model.hparams().n_embd;
  if (m->hp.n_deepstack > 0)
    throw Error(mmproj + ": " + std::to_string(m->hp.n_deepstack) +
                " deepstack mergers (Qwen3-VL); the language model reads mmprojs without them "
                "(Qwen3.5)");
  if (m->hp.n_out != E)
    throw Error(mmproj + ": projection width " + std::to_string(m->hp.n_out) +
                ", the model's embedding width is " + std::to_string(E));
  if (!model.hparams().rope_imrope)
    throw Error("the model has no IMROPE positions (qwen3next): it reads no images");
  const int32_t pad = tok.token_id("<|image_pad|>");
  if (pad < 0) throw Error("the vocabulary has no <|image_pad|> token");
  const auto at = std::find(tokens.begin(), tokens.end(), pad);
  const auto n_pads = std::count(tokens.begin(), tokens.end(), pad);
  if (n_pads != 1)
    throw Error("the prompt holds " + std::to_string(n_pads) +
                " <|image_pad|> tokens, not one where the image goes (with --chat the template "
                "must render an image part, as Qwen3.5's does)");

  const RgbImage rgb = image_decode_file(image);
  const VisionImage img = image_preprocess(rgb, m->hp);
  ThreadPool pool(threads);
  const auto t0 = std::chrono::steady_clock::now();
  SeqImage one;
  one.rows = vision_encode(*m, img, pool);
  ImagePrompt out;
  out.encode_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const int64_t side = m->hp.patch * m->hp.merge;
  one.ny = img.height / side;
  one.nx = img.width / side;
  one.start = at - tokens.begin();
  one.pixels_sha256 = sha256_hex(std::string_view(reinterpret_cast<const char*>(img.chw.data()),
                                                  img.chw.size() * sizeof(float)));
  INVAR_CHECK(int64_t(one.rows.size()) == one.n_tokens() * E);
  out.tokens.assign(tokens.begin(), at);
  out.tokens.insert(out.tokens.end(), size_t(one.n_tokens()), pad);
  out.tokens.insert(out.tokens.end(), at + 1, tokens.end());
  auto images = std::make_shared<SeqImages>();
  images->pad_id = pad;
  images->images.push_back(std::move(one));
  out.images = std::move(images);
  return out;
}

}  // namespace invar::app
