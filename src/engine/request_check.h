// What a request may ask of this engine: the context limit (resolved here, once) and the
// checks submit() runs before a request is queued.
#pragma once

#include <cstdint>

#include "engine/engine.h"
#include "model/hparams.h"

namespace invar {

// The context limit: --n-ctx when given, else the model's training context (1 Mi tokens when
// the file states none).
int64_t context_limit(const Hparams& hp, int64_t n_ctx_flag);

struct RequestLimits {
  int64_t n_vocab = 0;
  int64_t n_ctx = 0;
  int64_t block_size = 0;
  int64_t block_capacity = 0;  // KV blocks the cache budget holds
  int64_t cache_bytes = 0;     // the budget, for messages
  bool has_tokenizer = false;  // stop strings need one
  int64_t n_embd = 0;          // image rows' width
  bool imrope = false;         // the model takes images (IMROPE positions)
};

// Throws EngineError (invalid_request or context_overflow) naming the first problem.
void request_check(const GenerationRequest& r, const RequestLimits& lim);

}  // namespace invar
