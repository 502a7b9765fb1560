// `invar bench grammar --peer llama-server=PATH`: llama.cpp's grammar sampler on the same file,
// same thread count, same prompt and schemas, in the same run as invar's own decode rounds.
// llama-server runs one slot; each measurement is one POST /completion (greedy, n_predict tokens,
// its `json_schema` field or none) and reads llama-server's own `timings.predicted_per_second`,
// the decode rate it measured, so HTTP and process start-up are outside the figure.
#pragma once

#include <memory>
#include <string>

namespace invar::app {

class GrammarPeer {
 public:
  // Starts `path -m model` on a free loopback port and waits (≤ 300 s) for /health. Throws
  // Error with the log's tail when it does not come up.
  GrammarPeer(const std::string& path, const std::string& model, int threads);
  ~GrammarPeer();
  GrammarPeer(const GrammarPeer&) = delete;
  GrammarPeer& operator=(const GrammarPeer&) = delete;

  struct Decoded {
    double tok_s = 0;  // llama-server's predicted_per_second
    int64_t tokens = 0;
  };
  // One greedy completion of `prompt`, up to n tokens, under `json_schema` ("" → none;
  // end of sequence ignored then, as invar's unconstrained run does). Throws Error on a
  // failure answer.
  Decoded decode(const std::string& prompt, int64_t n, const std::string& json_schema);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace invar::app
