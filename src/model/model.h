// A loaded model and its forward pass (qwen3next, qwen35, qwen35moe).
//
// Per-sequence state lives outside the model, owned by the caller (engine / cache):
//  * recurrent state: for each Gated DeltaNet layer, in layer order,
//      conv [Kc−1][CONV] (row 0 = oldest input), then ssm [Hv][Dv][Dk]; all F32.
//  * attention KV: paged in blocks of `block_size` positions; one block holds every attention
//    layer: [n_attention_layers][2 (K, V)][block_size][Hkv][D] F32.
// forward() is the one code path for prefill and decode alike (rule N4): a chunk of one token
// and a chunk of 4096 run the same operations per token.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "core/thread_pool.h"
#include "model/gguf.h"
#include "model/hparams.h"

namespace invar {

struct ModelWeights;    // model/weights.h
struct ForwardScratch;  // model/forward.h

// Owns one caller's activation buffers (complete type in model/forward.h only).
struct ForwardScratchDeleter {
  void operator()(ForwardScratch* s) const;
};
using ForwardScratchPtr = std::unique_ptr<ForwardScratch, ForwardScratchDeleter>;

// One sequence's slice of a forward batch.
struct SeqChunk {
  const int32_t* tokens = nullptr;  // [n_tokens]
  int64_t n_tokens = 0;
  int64_t pos0 = 0;        // absolute position of tokens[0]
  float* state = nullptr;  // [Model::state_floats()] in/out: state after pos0−1 → after pos0+n−1
  float* const* kv_blocks = nullptr;  // block table covering positions 0 .. pos0+n_tokens−1
  int64_t block_size = 0;
  // Recurrent-state checkpoints (rule N5): for each i, checkpoint_dst[i] receives the state after
  // the token at position checkpoint_pos[i] − 1 (pos0 < checkpoint_pos[i] ≤ pos0 + n_tokens).
  const int64_t* checkpoint_pos = nullptr;
  float* const* checkpoint_dst = nullptr;
  int64_t n_checkpoints = 0;
  // Logits: all_logits → logits[n_tokens][V]; otherwise only the last token → logits[V].
  bool all_logits = false;
  float* logits = nullptr;
};

class Model {
 public:
  // Maps the file (every page now), validates (hparams_from_gguf) and binds the weights in
  // place. Throws invar::Error.
  static std::unique_ptr<Model> load(const std::string& path);
  ~Model();

  const Hparams& hparams() const { return hp_; }
  const GgufFile& gguf() const { return *file_; }
  // Hex SHA-256 of the file (one pass over it), computed once, on a thread of its own started
  // by sha256_start() (so that a caller can do other work meanwhile) or by the first sha256().
  void sha256_start() const;
  const std::string& sha256() const;
  double load_seconds() const { return load_seconds_; }  // map, validate, bind

  int64_t state_floats() const;                       // recurrent state per sequence
  int64_t kv_block_floats(int64_t block_size) const;  // one KV block
  int64_t kv_floats_per_token() const;                // n_attn_layers · 2 · Hkv · D

  // Activation buffers for batches of up to max_rows tokens in max_seqs sequences, allocated
  // now. A larger batch grows them (once). Each concurrent caller of forward() has its own, so
  // any number of engines can share one loaded model.
  ForwardScratchPtr scratch_make(int64_t max_rows, int64_t max_seqs) const;

  // Runs every chunk of the batch in `scratch`. Rows of different sequences share the matrix
  // products (batch-invariant by rule N1); recurrences and attention run per sequence.
  void forward(std::span<const SeqChunk> batch, ForwardScratch& scratch, ThreadPool& pool) const;

 private:
  Model();
  std::unique_ptr<GgufFile> file_;
  Hparams hp_;
  std::unique_ptr<ModelWeights> w_;
  double load_seconds_ = 0;
  mutable std::once_flag sha256_once_;
  // Last member: destroyed first, waiting for the hash before the mapping goes.
  mutable std::shared_future<std::string> sha256_;
};

}  // namespace invar
