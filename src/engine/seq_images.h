// Images in a sequence as the language model reads them (Qwen3-VL / Qwen3.5): each image is a
// run of ny·nx image-pad tokens whose input rows are the vision tower's merged rows, in
// row-major order of the merged grid, and whose IMROPE positions are 2-D.
//
// Positions (llama.cpp mtmd_image_tokens_get_decoder_pos and mtmd_image_tokens_get_n_pos, HF
// Qwen3VL get_rope_index): text advances by one per token; an image whose first pad is at text
// position p gives its token (y, x) the position (p, p + y, p + x), and the text after it
// continues at p + max(ny, nx). So every slot after an image turns by its slot minus the saved
// ny·nx − max(ny, nx) of every image before it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/rope.h"

namespace invar {

struct SeqImage {
  int64_t start = 0;          // slot of its first pad token
  int64_t ny = 0, nx = 0;     // merged grid: ny·nx pad tokens, row-major
  std::vector<float> rows;    // [ny·nx][E] the tower's output
  std::string pixels_sha256;  // hex SHA-256 of the decoded, resized pixels (its cache identity)
  int64_t n_tokens() const { return ny * nx; }
};

struct SeqImages {
  std::vector<SeqImage> images;  // ascending start, disjoint
  int32_t pad_id = -1;           // the image-pad token every image slot holds

  // IMROPE position of slot i (any slot, also past the prompt).
  RopePos rope_pos(int64_t i) const;
  // Input row [E] of slot i, or null for a text slot (token_embd).
  const float* embd_row(int64_t i, int64_t n_embd) const;
  // SeqChunk::embd_rows and rope_pos for slots [pos0, pos0 + n) into rows[n] and pos[n].
  void chunk_inputs(int64_t pos0, int64_t n, int64_t n_embd, std::vector<const float*>& rows,
                    std::vector<RopePos>& pos) const;
  // The ids the prefix cache keys the sequence by (vLLM's multimodal hash in the block key):
  // tokens with every image slot's id replaced by a negative id drawn from its image's pixel
  // hash, grid and the slot's place in the image. Blocks before an image keep their text keys
  // (shared with requests without it); blocks holding an image match only the same image there.
  std::vector<int32_t> cache_key_tokens(std::span<const int32_t> tokens) const;
  // Throws Error unless the images are ascending, disjoint, within n_tokens slots, every row
  // set has ny·nx·n_embd floats and every image slot of `tokens` holds pad_id.
  void check(std::span<const int32_t> tokens, int64_t n_embd) const;
};

// Places images into a rendered prompt: the chat template writes one `pad` where each image
// goes, and each is widened to one pad per merged row (Qwen3.5's processor and llama.cpp's mtmd
// do the same), in order; each image's start is set to its first slot. `images` come with
// ny, nx, rows and pixels_sha256 set. Throws Error when the prompt holds another number of
// pads than images (a template that renders no image part, or pads typed by a trusted client).
SeqImages seq_images_place(std::vector<int32_t>& tokens, int32_t pad, std::vector<SeqImage> images);
// seq_images_place's first check alone, before any image is encoded. Throws Error.
void seq_images_pads_check(std::span<const int32_t> tokens, int32_t pad, size_t n_images);

}  // namespace invar
