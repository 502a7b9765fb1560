#include "engine/model_runner.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace invar {

ModelRunner::ModelRunner(const Model& model, int64_t max_batch_tokens, int64_t max_running,
                         int threads, int64_t block_size)
    : model_(model),
      n_vocab_(model.hparams().n_vocab),
      n_embd_(model.hparams().n_embd),
      block_size_(block_size),
      state_floats_(model.state_floats()),
      pool_(threads),
      scratch_(model.scratch_make(max_batch_tokens, std::min(max_running, max_batch_tokens))) {
  const int64_t max_seqs = std::min(max_running, max_batch_tokens);
  batch_.reserve(static_cast<size_t>(max_seqs));
  logits_offset_.reserve(static_cast<size_t>(max_seqs));
  // A last-position row per sequence of a full batch; requests that want every row (prompt
  // logprobs, captured logits, drafts to verify) grow it to their largest step once.
  logits_.resize(static_cast<size_t>(max_seqs * n_vocab_));
}

void ModelRunner::checkpoints_with_rollback(size_t k, const ChunkRun& c, SeqChunk& sc) {
  std::vector<int64_t>& pos = spec_ck_pos_[k];
  std::vector<float*>& dst = spec_ck_dst_[k];
  pos.assign(c.checkpoint_pos.begin(), c.checkpoint_pos.end());
  dst.assign(c.checkpoint_dst.begin(), c.checkpoint_dst.end());
  for (int64_t j = 1; j <= c.n_draft; ++j) {
    pos.push_back(c.pos0 + j);  // the state after position pos0 + j − 1
    dst.push_back(rollback_.data() + rollback_offset_[k] + (j - 1) * state_floats_);
  }
  sc.checkpoint_pos = pos.data();
  sc.checkpoint_dst = dst.data();
  sc.n_checkpoints = static_cast<int64_t>(pos.size());
}

void ModelRunner::run(std::span<const ChunkRun> chunks) {
  const size_t n = chunks.size();
  batch_.resize(n);
  logits_offset_.resize(n);
  rollback_offset_.resize(n);
  if (spec_ck_pos_.size() < n) {
    spec_ck_pos_.resize(n);
    spec_ck_dst_.resize(n);
  }
  int64_t rows = 0, drafts = 0, hidden_rows = 0;
  hidden_offset_.resize(n);
  for (size_t k = 0; k < n; ++k) {
    const ChunkRun& c = chunks[k];
    hidden_offset_[k] = hidden_rows * n_embd_;
    hidden_rows += c.n_tokens;
    logits_offset_[k] = rows * n_vocab_;
    rows += c.all_rows ? c.n_tokens : 1;
    rollback_offset_[k] = drafts * state_floats_;
    drafts += c.n_draft;
  }
  if (static_cast<int64_t>(logits_.size()) < rows * n_vocab_)
    logits_.resize(static_cast<size_t>(rows * n_vocab_));
  if (hidden_on_ && static_cast<int64_t>(hidden_.size()) < hidden_rows * n_embd_)
    hidden_.resize(static_cast<size_t>(hidden_rows * n_embd_));
  if (static_cast<int64_t>(rollback_.size()) < drafts * state_floats_)
    rollback_.resize(static_cast<size_t>(drafts * state_floats_));
  spec_tokens_.resize(static_cast<size_t>(drafts) + n);  // no reallocation below
  size_t spec_at = 0;
  for (size_t k = 0; k < n; ++k) {
    const ChunkRun& c = chunks[k];
    SeqChunk& sc = batch_[k];
    sc = SeqChunk{};
    sc.tokens = c.tokens;
    sc.n_tokens = c.n_tokens;
    sc.pos0 = c.pos0;
    sc.state = c.state;
    sc.kv_blocks = c.kv_blocks;
    sc.block_size = block_size_;
    sc.checkpoint_pos = c.checkpoint_pos.data();
    sc.checkpoint_dst = c.checkpoint_dst.data();
    sc.n_checkpoints = static_cast<int64_t>(c.checkpoint_pos.size());
    if (c.n_draft > 0) {
      INVAR_CHECK(c.n_tokens == c.n_draft + 1 && c.drafts != nullptr);
      int32_t* t = spec_tokens_.data() + spec_at;
      t[0] = c.tokens[0];
      std::copy_n(c.drafts, c.n_draft, t + 1);
      spec_at += static_cast<size_t>(c.n_tokens);
      sc.tokens = t;
      checkpoints_with_rollback(k, c, sc);
    }
    if (c.images) {
      if (image_rows_.size() < n) {
        image_rows_.resize(n);
        image_pos_.resize(n);
      }
      c.images->chunk_inputs(c.pos0, c.n_tokens, n_embd_, image_rows_[k], image_pos_[k]);
      sc.embd_rows = image_rows_[k].data();
      sc.rope_pos = image_pos_[k].data();
    }
    if (hidden_on_) sc.hidden = hidden_.data() + hidden_offset_[k];
    sc.all_logits = c.all_rows;
    sc.logits = logits_.data() + logits_offset_[k];
  }
  model_.forward(batch_, *scratch_, pool_);
}

void ModelRunner::state_rollback(int64_t k, int64_t n_kept, float* state) const {
  INVAR_CHECK(n_kept >= 1 && (n_kept - 1) * state_floats_ < static_cast<int64_t>(rollback_.size()));
  const float* src =
      rollback_.data() + rollback_offset_[static_cast<size_t>(k)] + (n_kept - 1) * state_floats_;
  std::memcpy(state, src, static_cast<size_t>(state_floats_) * sizeof(float));
}

}  // namespace invar
