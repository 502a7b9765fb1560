#include "engine/model_runner.h"

#include <algorithm>

#include "engine/sequence.h"

namespace invar {

ModelRunner::ModelRunner(const Model& model, int64_t max_batch_tokens, int64_t max_running,
                         int threads, int64_t block_size)
    : model_(model),
      n_vocab_(model.hparams().n_vocab),
      block_size_(block_size),
      pool_(threads),
      scratch_(model.scratch_make(max_batch_tokens, std::min(max_running, max_batch_tokens))) {
  const int64_t max_seqs = std::min(max_running, max_batch_tokens);
  batch_.reserve(static_cast<size_t>(max_seqs));
  logits_offset_.reserve(static_cast<size_t>(max_seqs));
  // A last-position row per sequence of a full batch; requests that want every row (prompt
  // logprobs, captured logits) grow it to their largest step once.
  logits_.resize(static_cast<size_t>(max_seqs * n_vocab_));
}

void ModelRunner::run(const StepPlan& plan, const Scheduler& sched) {
  const auto n = static_cast<size_t>(plan.n_chunks);
  batch_.resize(n);
  logits_offset_.resize(n);
  int64_t rows = 0;
  for (size_t k = 0; k < n; ++k) {
    const ChunkPlan& c = plan.chunks[k];
    logits_offset_[k] = rows * n_vocab_;
    rows += sequence_of(c.seq).wants_all_logits() ? c.n_tokens : 1;
  }
  if (static_cast<int64_t>(logits_.size()) < rows * n_vocab_)
    logits_.resize(static_cast<size_t>(rows * n_vocab_));
  for (size_t k = 0; k < n; ++k) {
    const ChunkPlan& c = plan.chunks[k];
    SeqChunk& sc = batch_[k];
    sc = SeqChunk{};
    sc.tokens = c.seq->tokens.data() + c.pos0;
    sc.n_tokens = c.n_tokens;
    sc.pos0 = c.pos0;
    sc.state = sched.state(*c.seq);
    sc.kv_blocks = c.seq->block_ptrs.data();
    sc.block_size = block_size_;
    sc.checkpoint_pos = c.checkpoint_pos.data();
    sc.checkpoint_dst = c.checkpoint_dst.data();
    sc.n_checkpoints = static_cast<int64_t>(c.checkpoint_pos.size());
    sc.all_logits = sequence_of(c.seq).wants_all_logits();
    sc.logits = logits_.data() + logits_offset_[k];
  }
  model_.forward(batch_, *scratch_, pool_);
}

}  // namespace invar
