// A loaded model and its forward pass (qwen3next, qwen35, qwen35moe).
//
// Per-sequence state lives outside the model, owned by the caller (engine / cache):
//  * recurrent state: for each Gated DeltaNet layer, in layer order,
//      conv [Kc−1][CONV] (row 0 = oldest input), then ssm [Hv][Dv][Dk]; all F32.
//  * attention KV: paged in blocks of `block_size` positions; one block holds every attention
//    layer: [n_attention_layers][2 (K, V)][block_size][Hkv][D] F32.
// forward() is the one code path for prefill and decode alike (rule N4): a chunk of one token
// and a chunk of 4096 run the same operations per token.
//
// MTP draft head (files with an MTP block, has_mtp()): mtp_forward() runs the block for rows
// (hidden row of position p−1, token at p) at position p, as llama.cpp's graph_mtp does. Its own
// KV is caller-owned and paged like the trunk's, one layer per block: [2 (K, V)][block_size][Hkv]
// [D] F32 (mtp_kv_block_floats). Drafts only choose what the trunk verifies, never the answer.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "kernels/rope.h"
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
  int64_t pos0 = 0;  // absolute position of tokens[0] (its slot in state and KV)
  // Image input (null: text only). embd_rows[t], where not null, is row t's input [E] in place
  // of token_embd[tokens[t]] (a merged row of the vision tower; tokens[t] stays the image pad).
  const float* const* embd_rows = nullptr;  // [n_tokens]
  // IMROPE positions (qwen35*): rope_pos[t] is row t's (t, h, w). null: (p, p, p) at position
  // p = pos0 + t. A sequence with an image gives them for every row: the text after an image
  // turns by its own position minus what the image saved (rope.h RopePos).
  const RopePos* rope_pos = nullptr;  // [n_tokens]
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
  // [n_tokens][E] trunk hidden rows the MTP head consumes: the final hidden state after
  // output_norm (the LM head's input, llama.cpp's h_nextn); null: not written.
  float* hidden = nullptr;
};

// One sequence's slice of an MTP batch. Row i is (hidden_in[i], tokens[i]) at position pos0 + i:
// hidden_in[i] is the hidden row of position pos0 + i − 1, from the trunk (SeqChunk::hidden) or,
// to chain drafts, from the previous MTP row (hidden_out); zeros where there is none (position 0).
struct MtpChunk {
  const int32_t* tokens = nullptr;   // [n_tokens]
  const float* hidden_in = nullptr;  // [n_tokens][E]
  int64_t n_tokens = 0;
  int64_t pos0 = 0;
  float* const* kv_blocks = nullptr;  // MTP block table covering positions 0 .. pos0+n_tokens−1
  int64_t block_size = 0;
  bool all_logits = false;  // logits[n_tokens][V]; otherwise the last row's logits[V]
  float* logits = nullptr;
  float* hidden_out = nullptr;  // [n_tokens][E] after the head norm, to chain; null: not written
};

class Model {
 public:
  // Maps the file, validates (hparams_from_gguf) and binds the weights in place. Throws
  // invar::Error. Every page of the file is mapped before it returns, or, with
  // populate_now = false, by a thread of its own that populate_wait() waits for (a caller sets
  // itself up meanwhile: tokenizer, engine).
  // huge_pages: the weights are a private copy in 2 MiB pages (GgufFile::open), loaded now.
  static std::unique_ptr<Model> load(const std::string& path, bool populate_now = true,
                                     bool huge_pages = false);
  // Seconds the pages took to map, once they all are (0 when load did it).
  double populate_wait() const;
  ~Model();

  const Hparams& hparams() const { return hp_; }
  const GgufFile& gguf() const { return *file_; }
  // Hex SHA-256 of the file (one pass over it), computed once, on a thread of its own started
  // by sha256_start() (so that a caller can do other work meanwhile) or by the first sha256().
  // With a cache_dir (model/sha256_cache.h), the hash recorded there for the file's identity at
  // load is used without reading the file, and a computed one is recorded.
  void sha256_start(const std::string& cache_dir = "") const;
  const std::string& sha256() const;
  // After sha256(): where the hash came from (cache entry, or computed: time and rate, whether
  // it was recorded), for the start-up log.
  const std::string& sha256_origin() const;
  double load_seconds() const { return load_seconds_; }  // map, validate, bind

  int64_t state_floats() const;                       // recurrent state per sequence
  int64_t kv_block_floats(int64_t block_size) const;  // one KV block
  int64_t kv_floats_per_token() const;                // n_attn_layers · 2 · Hkv · D
  bool has_mtp() const { return hp_.mtp; }
  int64_t mtp_kv_block_floats(int64_t block_size) const;  // 2 · block_size · Hkv · D

  // Activation buffers for batches of up to max_rows tokens in max_seqs sequences, allocated
  // now. A larger batch grows them (once). Each concurrent caller of forward() has its own, so
  // any number of engines can share one loaded model.
  ForwardScratchPtr scratch_make(int64_t max_rows, int64_t max_seqs) const;

  // Runs every chunk of the batch in `scratch`. Rows of different sequences share the matrix
  // products (batch-invariant by rule N1); recurrences and attention run per sequence.
  void forward(std::span<const SeqChunk> batch, ForwardScratch& scratch, ThreadPool& pool) const;

  // Runs the MTP block for every chunk of the batch (requires has_mtp()): writes each row's K, V
  // into the chunk's MTP KV, attends over positions 0..p of it, and returns logits (and the
  // hidden rows to chain with). Same kernels and numerics as forward (rules N1-N4): the bits of
  // a row depend only on its inputs and the MTP KV of positions before it.
  void mtp_forward(std::span<const MtpChunk> batch, ForwardScratch& scratch,
                   ThreadPool& pool) const;

 private:
  Model();
  std::unique_ptr<GgufFile> file_;
  Hparams hp_;
  std::unique_ptr<ModelWeights> w_;
  double load_seconds_ = 0;
  // Destroyed before file_: the populating thread is done before the mapping goes.
  std::shared_future<double> populate_;
  mutable std::once_flag sha256_once_;
  mutable std::string sha256_origin_;  // written before sha256_ is ready
  // Last member: destroyed first, waiting for the hash before the mapping goes.
  mutable std::shared_future<std::string> sha256_;
};

}  // namespace invar
