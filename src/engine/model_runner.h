// Runs one step's plan through the model. Owns what a forward pass needs besides the model:
// the thread pool, the activation scratch (sized once from max_batch_tokens and max_running)
// and the logits rows, so any number of engines can share one loaded, read-only Model.
//
// A chunk with drafts (speculative decoding) runs its last token and drafts as one chunk with
// every logits row, and copies out the recurrent state after each of its positions but the last
// (the rollback points): when drafts are rejected the sequence resumes from the state after the
// last kept position, exactly as if it had decoded one token at a time (rules N4, N5).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "core/zero_pages.h"
#include "engine/seq_images.h"
#include "model/model.h"

namespace invar {

// One chunk of a step as the runner reads it, gathered by the engine from the step's plan and
// the chunk's sequence (engine.cpp, chunk_run_of): the runner reads no scheduler state.
struct ChunkRun {
  const int32_t* tokens = nullptr;  // [n_tokens] from position pos0; with drafts, its first
  int64_t pos0 = 0, n_tokens = 0;
  // A decode with drafts runs tokens[0] (the last token) then drafts[0 .. n_draft), as one
  // chunk of n_tokens = n_draft + 1 positions.
  const int32_t* drafts = nullptr;
  int64_t n_draft = 0;
  float* state = nullptr;                   // the sequence's live state, advanced in place
  float* const* kv_blocks = nullptr;        // its block table
  std::span<const int64_t> checkpoint_pos;  // block boundaries in (pos0, pos0 + n_tokens]
  std::span<float* const> checkpoint_dst;   // their cache buffers
  const SeqImages* images = nullptr;        // null: text only
  // Every position's logits row (drafts to verify, prompt logprobs, captured logits); else the
  // last position's only.
  bool all_rows = false;
};

class ModelRunner {
 public:
  ModelRunner(const Model& model, int64_t max_batch_tokens, int64_t max_running, int threads,
              int64_t block_size);

  // Forward pass over every chunk of a step. Throws what the model throws; the chunks' states
  // are then undefined.
  void run(std::span<const ChunkRun> chunks);
  // Logits of chunk k of the last run: [n_tokens][V] when its all_rows, else the last
  // position's [V].
  const float* logits(int64_t k) const {
    return logits_.data() + logits_offset_[static_cast<size_t>(k)];
  }
  // Asks the model for the trunk's hidden rows (SeqChunk::hidden) of every chunk from now on.
  void hidden_want(bool on) { hidden_on_ = on; }
  // The trunk's hidden rows of chunk k of the last run ([n_tokens][n_embd]) for a drafter that
  // reads them; null unless hidden_want(true).
  const float* hidden(int64_t k) const {
    return hidden_on_ ? hidden_.data() + hidden_offset_[static_cast<size_t>(k)] : nullptr;
  }
  // Chunk k of the last run had drafts and keeps only its first n_kept positions: puts the
  // state after its last kept position into the sequence's live state.
  void state_rollback(int64_t k, int64_t n_kept, float* state) const;
  ThreadPool& pool() { return pool_; }

 private:
  void checkpoints_with_rollback(size_t k, const ChunkRun& c, SeqChunk& sc);

  const Model& model_;
  const int64_t n_vocab_, n_embd_, block_size_, state_floats_;
  ThreadPool pool_;
  ForwardScratchPtr scratch_;
  std::vector<SeqChunk> batch_;
  ZeroedVector<float> logits_;  // zero pages: a step touches the rows it writes
  std::vector<int64_t> logits_offset_;
  // Chunks with drafts: their tokens (last token + drafts), every checkpoint position and
  // buffer (the scheduler's block boundaries plus one rollback point per draft), and the
  // rollback states [Σ n_draft][state_floats].
  std::vector<int32_t> spec_tokens_;
  std::vector<std::vector<int64_t>> spec_ck_pos_;
  std::vector<std::vector<float*>> spec_ck_dst_;
  ZeroedVector<float> rollback_;
  std::vector<int64_t> rollback_offset_;  // per chunk: its first rollback state (floats)
  // Chunks of sequences with images: their input rows and IMROPE positions (SeqChunk).
  std::vector<std::vector<const float*>> image_rows_;
  std::vector<std::vector<RopePos>> image_pos_;
  bool hidden_on_ = false;
  ZeroedVector<float> hidden_;          // [Σ n_tokens][n_embd] when hidden_on_
  std::vector<int64_t> hidden_offset_;  // per chunk: its first hidden row (floats)
};

}  // namespace invar
