// The image-encode benchmark `invar bench vision` runs, shared with `invar bench model --image`:
// the tower's encode time per thread count (decode and resize excluded, buffers warm), best of
// `runs`, with llama.cpp's llama-mtmd-cli on the same files and threads beside it when a peer is
// given.
#pragma once

#include <string>

namespace invar::app {

struct VisionBenchArgs {
  std::string mmproj, image;
  std::string peer;        // "llama-mtmd-cli=PATH" ("": invar alone)
  std::string peer_model;  // the text model llama-mtmd-cli loads (its width = the projection's)
  std::string threads = "1,2";
  int runs = 3;
};

// Prints the table; returns 0. Throws Error.
int vision_bench_run(const VisionBenchArgs& a);

}  // namespace invar::app
