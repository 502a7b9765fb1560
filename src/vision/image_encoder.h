// One vision tower beside a language model: images as sent (PNG or JPEG bytes) become the rows
// the language model reads, each encoded once while it stays in the EncodeCache. What
// `invar serve --mmproj` and `invar run --image` share.
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/thread_pool.h"
#include "vision/encode_bounds.h"
#include "vision/encode_cache.h"
#include "vision/image_decode.h"
#include "vision/vision_forward.h"
#include "vision/vision_model.h"

namespace invar {

struct EncodedImage {
  int64_t ny = 0, nx = 0;     // merged grid: ny·nx rows
  std::string pixels_sha256;  // hex SHA-256 of the resized, normalised pixels
  EncodeCache::Rows rows;     // [ny·nx][P]
  bool cache_hit = false;     // taken from the cache, not encoded
  double encode_ms = 0;       // the tower's time (0 on a hit)
  // CPU the tower's other threads took (0 on a hit): the calling thread's own is on its clock.
  double pool_cpu_s = 0;
};

struct ImageEncoderStats {
  int64_t encodes = 0;     // images run through the tower to the end
  int64_t cache_hits = 0;  // images whose rows came from the cache
  double encode_seconds = 0;
  int64_t cache_bytes = 0;  // rows held
  int64_t started = 0;      // encodes that began the tower (those stopped included)
  int64_t cancelled = 0;    // stopped because the client was gone (EncodeBounds::cancelled)
  int64_t over_budget = 0;  // stopped over their CPU budget (EncodeBounds::cpu_budget_s)
};

class ImageEncoder {
 public:
  // Loads the mmproj and checks that a language model of width lm_embd reads it: projection
  // width = lm_embd, no deepstack mergers (Qwen3-VL's, which the text model would add to its
  // first layers), and IMROPE positions in the model (lm_imrope; qwen3next has none). Throws
  // Error naming the file and the problem.
  ImageEncoder(const std::string& mmproj, int64_t lm_embd, bool lm_imrope, int threads,
               int64_t cache_bytes);

  // The merged grid (ny, nx) of an encoded image from its header alone (image_dims, then the
  // size rule): the rows encode() gives it, known before anything is decoded. Throws Error as
  // encode() does for a header it cannot read or a size over `limits`.
  std::pair<int64_t, int64_t> grid_of(std::span<const uint8_t> bytes,
                                      const ImageLimits& limits = {}) const;

  // Decodes under `limits`, resizes, normalises and encodes (or takes the cache's rows).
  // Throws Error for an image that cannot be decoded or is over a limit, EncodeStopped when
  // `bounds` stop the tower. One encode runs at a time (the pool and buffers are the
  // encoder's); callers on other threads wait.
  EncodedImage encode(std::span<const uint8_t> bytes, const ImageLimits& limits = {},
                      const EncodeBounds& bounds = {});
  EncodedImage encode(const RgbImage& rgb, const EncodeBounds& bounds = {});

  ImageEncoderStats stats() const;
  const VisionHparams& hparams() const { return m_->hp; }
  const std::string& path() const { return path_; }

 private:
  double pool_cpu_seconds() const;  // CPU the pool's workers have taken since they started
  // encode() with the calling thread's CPU clock read at own0, before the decode.
  EncodedImage encode_since(const RgbImage& rgb, const EncodeBounds& bounds, double own0);

  std::string path_;
  std::unique_ptr<VisionModel> m_;
  std::mutex mu_;  // guards pool_ and buf_
  ThreadPool pool_;
  std::vector<clockid_t> worker_clocks_;  // the CPU clock of each of pool_'s workers
  VisionBuffers buf_;
  EncodeCache cache_;
  std::atomic<int64_t> encodes_{0}, hits_{0}, encode_us_{0}, started_{0}, cancelled_{0},
      over_budget_{0};
};

}  // namespace invar
