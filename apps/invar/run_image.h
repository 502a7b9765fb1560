// `invar run --mmproj FILE --image IMG`: the image through the vision tower, printing its size,
// token count, encode time and the SHA-256 of the embeddings' bytes (a pure function of the image
// and the mmproj: the same digest for every --threads and --simd).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/seq_images.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace invar::app {

// embeddings_out: when not empty, the embeddings are also written there, [tokens][width]
// little-endian float32 (for comparing with other implementations).
int run_image(const std::string& mmproj, const std::string& image, int threads, bool json,
              const std::string& embeddings_out);

// A prompt with one image, as the language model reads it: the image encoded by the tower,
// the prompt's one <|image_pad|> widened to one pad per merged row (Qwen3.5's processor does the
// same to the template's single pad), the image's slots and IMROPE grid.
struct ImagePrompt {
  std::vector<int32_t> tokens;
  std::shared_ptr<const SeqImages> images;
  double encode_ms = 0;
};
// Throws Error for an mmproj of another width than the model, one with deepstack mergers
// (Qwen3-VL: the language model would need their rows added to its first layers), or a prompt
// without exactly one <|image_pad|>.
ImagePrompt image_prompt(const std::string& mmproj, const std::string& image, const Model& model,
                         const Tokenizer& tok, std::vector<int32_t> tokens, int threads);

}  // namespace invar::app
