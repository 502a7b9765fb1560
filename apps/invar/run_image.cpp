#include "run_image.h"

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

}  // namespace invar::app
