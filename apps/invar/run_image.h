// `invar run --mmproj FILE --image IMG`: the image through the vision tower, printing its size,
// token count, encode time and the SHA-256 of the embeddings' bytes (a pure function of the image
// and the mmproj: the same digest for every --threads and --simd).
#pragma once

#include <string>

namespace invar::app {

// embeddings_out: when not empty, the embeddings are also written there, [tokens][width]
// little-endian float32 (for comparing with other implementations).
int run_image(const std::string& mmproj, const std::string& image, int threads, bool json,
              const std::string& embeddings_out);

}  // namespace invar::app
