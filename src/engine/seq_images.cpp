#include "engine/seq_images.h"

#include <algorithm>

#include "core/error.h"

namespace invar {

RopePos SeqImages::rope_pos(int64_t i) const {
  int64_t saved = 0;  // slots minus positions of the images before slot i
  for (const SeqImage& im : images) {
    if (i < im.start) break;
    const int64_t p = im.start - saved;
    if (i < im.start + im.n_tokens()) {
      const int64_t k = i - im.start;
      return {p, p + k / im.nx, p + k % im.nx};
    }
    saved += im.n_tokens() - std::max(im.ny, im.nx);
  }
  return {i - saved, i - saved, i - saved};
}

const float* SeqImages::embd_row(int64_t i, int64_t n_embd) const {
  for (const SeqImage& im : images)
    if (i >= im.start && i < im.start + im.n_tokens())
      return im.rows.data() + (i - im.start) * n_embd;
  return nullptr;
}

void SeqImages::chunk_inputs(int64_t pos0, int64_t n, int64_t n_embd,
                             std::vector<const float*>& rows, std::vector<RopePos>& pos) const {
  rows.resize(size_t(n));
  pos.resize(size_t(n));
  for (int64_t t = 0; t < n; ++t) {
    rows[size_t(t)] = embd_row(pos0 + t, n_embd);
    pos[size_t(t)] = rope_pos(pos0 + t);
  }
}

std::vector<int32_t> SeqImages::cache_key_tokens(std::span<const int32_t> tokens) const {
  std::vector<int32_t> keys(tokens.begin(), tokens.end());
  for (const SeqImage& im : images) {
    // FNV-1a over (pixel hash, grid); then per slot over its index: ids in [−2³¹, −1], which no
    // token has.
    uint64_t h = 0xcbf29ce484222325ull;
    auto mix = [&h](const std::string& s) {
      for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
    };
    mix(im.pixels_sha256 + ":" + std::to_string(im.ny) + "x" + std::to_string(im.nx));
    for (int64_t k = 0; k < im.n_tokens() && im.start + k < int64_t(keys.size()); ++k) {
      uint64_t hk = h;
      for (int b = 0; b < 8; ++b) hk = (hk ^ ((uint64_t(k) >> (8 * b)) & 0xff)) * 0x100000001b3ull;
      keys[size_t(im.start + k)] = -1 - int32_t(hk & 0x7fffffffull);
    }
  }
  return keys;
}

void SeqImages::check(std::span<const int32_t> tokens, int64_t n_embd) const {
  int64_t end = 0;
  for (const SeqImage& im : images) {
    INVAR_CHECK(im.ny > 0 && im.nx > 0 && im.start >= end, "images out of order or overlapping");
    INVAR_CHECK(im.start + im.n_tokens() <= int64_t(tokens.size()), "image past the prompt");
    INVAR_CHECK(int64_t(im.rows.size()) == im.n_tokens() * n_embd,
                "image rows of another width than the model's");
    for (int64_t i = im.start; i < im.start + im.n_tokens(); ++i)
      if (tokens[size_t(i)] != pad_id)
        throw Error("image run at " + std::to_string(im.start) + ": slot " + std::to_string(i) +
                    " holds token " + std::to_string(tokens[size_t(i)]) + ", not the image pad");
    end = im.start + im.n_tokens();
  }
}

void seq_images_pads_check(std::span<const int32_t> tokens, int32_t pad, size_t n_images) {
  const auto n_pads = std::count(tokens.begin(), tokens.end(), pad);
  if (n_pads != int64_t(n_images))
    throw Error("the prompt holds " + std::to_string(n_pads) + " <|image_pad|> tokens for " +
                std::to_string(n_images) +
                " images: the chat template must render each image part as one (Qwen3.5's "
                "does)");
}

SeqImages seq_images_place(std::vector<int32_t>& tokens, int32_t pad,
                           std::vector<SeqImage> images) {
  seq_images_pads_check(tokens, pad, images.size());
  std::vector<int32_t> out;
  size_t n_rows = 0;
  for (const SeqImage& im : images) n_rows += size_t(im.n_tokens());
  out.reserve(tokens.size() + n_rows);
  size_t k = 0;
  for (int32_t t : tokens) {
    if (t != pad) {
      out.push_back(t);
      continue;
    }
    images[k].start = int64_t(out.size());
    out.insert(out.end(), size_t(images[k].n_tokens()), pad);
    ++k;
  }
  tokens = std::move(out);
  SeqImages s;
  s.pad_id = pad;
  s.images = std::move(images);
  return s;
}

}  // namespace invar
