// Runs one step's plan through the model. Owns what a forward pass needs besides the model:
// the thread pool, the activation scratch (sized once from max_batch_tokens and max_running)
// and the logits rows, so any number of engines can share one loaded, read-only Model.
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "engine/scheduler.h"
#include "model/model.h"

namespace invar {

class ModelRunner {
 public:
  ModelRunner(const Model& model, int64_t max_batch_tokens, int64_t max_running, int threads,
              int64_t block_size);

  // Forward pass over every chunk of the plan (states and KV blocks from the scheduler).
  // Throws what the model throws; the chunks' states are then undefined.
  void run(const StepPlan& plan, const Scheduler& sched);
  // Logits of chunk k of the last run: [n_tokens][V] when its sequence wants every row, else
  // the last position's [V].
  const float* logits(int64_t k) const {
    return logits_.data() + logits_offset_[static_cast<size_t>(k)];
  }

 private:
  const Model& model_;
  const int64_t n_vocab_, block_size_;
  ThreadPool pool_;
  ForwardScratchPtr scratch_;
  std::vector<SeqChunk> batch_;
  std::vector<float> logits_;
  std::vector<int64_t> logits_offset_;
};

}  // namespace invar
