#include "engine/request_check.h"

#include <cmath>
#include <string>

namespace invar {
namespace {

[[noreturn]] void refuse(const char* param, const std::string& message) {
  throw EngineError(ErrorKind::invalid_request, param, message);
}

}  // namespace

int64_t context_limit(const Hparams& hp, int64_t n_ctx_flag) {
  if (n_ctx_flag > 0) return n_ctx_flag;
  return hp.n_ctx_train > 0 ? hp.n_ctx_limit() : int64_t(1) << 20;
}

void request_check(const GenerationRequest& r, const RequestLimits& lim) {
  if (r.prompt.empty()) refuse("prompt", "prompt is empty");
  for (size_t i = 0; i < r.prompt.size(); ++i)
    if (r.prompt[i] < 0 || r.prompt[i] >= lim.n_vocab)
      refuse("prompt", "prompt token " + std::to_string(i) + " has id " +
                           std::to_string(r.prompt[i]) + ", outside the vocabulary [0, " +
                           std::to_string(lim.n_vocab) + ")");
  if (r.max_tokens < 0) refuse("max_tokens", "max_tokens must be ≥ 0");
  if (r.images) {
    if (!lim.imrope) refuse("images", "this model reads no images (no IMROPE positions)");
    try {
      r.images->check(r.prompt, lim.n_embd);
    } catch (const Error& e) {
      refuse("images", e.what());
    }
  }
  const int64_t total = static_cast<int64_t>(r.prompt.size()) + r.max_tokens;
  if (total > lim.n_ctx)
    throw EngineError(ErrorKind::context_overflow, "max_tokens",
                      "prompt (" + std::to_string(r.prompt.size()) + " tokens) + max_tokens (" +
                          std::to_string(r.max_tokens) + ") exceeds the context limit of " +
                          std::to_string(lim.n_ctx) + " tokens");
  const auto& sp = r.sampling;
  if (!(sp.temperature >= 0.0f) || !std::isfinite(sp.temperature))
    refuse("temperature", "temperature must be a finite number ≥ 0");
  if (!(sp.top_p > 0.0f && sp.top_p <= 1.0f)) refuse("top_p", "top_p must be in (0, 1]");
  if (sp.top_k < 0) refuse("top_k", "top_k must be ≥ 0");
  if (!(sp.min_p >= 0.0f && sp.min_p <= 1.0f)) refuse("min_p", "min_p must be in [0, 1]");
  for (const auto& [id, bias] : sp.logit_bias) {
    if (id < 0 || id >= lim.n_vocab)
      refuse("logit_bias", "logit_bias names token " + std::to_string(id) +
                               ", outside the vocabulary [0, " + std::to_string(lim.n_vocab) + ")");
    if (!(bias >= -100.0f && bias <= 100.0f))
      refuse("logit_bias", "logit_bias values must be in [-100, 100]");
  }
  if (!(sp.repetition_penalty > 0.0f) || !std::isfinite(sp.repetition_penalty))
    refuse("repetition_penalty", "repetition_penalty must be a finite number > 0");
  if (sp.repetition_last_n < -1) refuse("repeat_last_n", "repeat_last_n must be ≥ -1");
  if (!(sp.frequency_penalty >= -2.0f && sp.frequency_penalty <= 2.0f))
    refuse("frequency_penalty", "frequency_penalty must be in [-2, 2]");
  if (!(sp.presence_penalty >= -2.0f && sp.presence_penalty <= 2.0f))
    refuse("presence_penalty", "presence_penalty must be in [-2, 2]");
  if (r.top_logprobs < 0 || r.top_logprobs > 20)
    refuse("top_logprobs", "top_logprobs must be in 0..20");
  if (r.prompt_logprobs > 20) refuse("prompt_logprobs", "prompt_logprobs must be in 0..20");
  for (int32_t t : r.stop_tokens)
    if (t < 0 || t >= lim.n_vocab)
      refuse("stop", "stop token " + std::to_string(t) + " is not in the vocabulary");
  if (!r.stop_strings.empty() && !lim.has_tokenizer)
    refuse("stop", "stop strings need a tokenizer; this engine has none");
  for (const auto& s : r.stop_strings)
    if (s.empty()) refuse("stop", "a stop string is empty");
  if (r.grammar && !lim.has_tokenizer)
    refuse("response_format", "structured output needs a tokenizer; this engine has none");
  if (r.grammar_after >= lim.n_vocab)
    refuse("response_format",
           "grammar_after " + std::to_string(r.grammar_after) + " is not in the vocabulary");
  const int64_t blocks = (total + 1 + lim.block_size - 1) / lim.block_size;
  if (blocks > lim.block_capacity)
    throw EngineError(ErrorKind::context_overflow, "max_tokens",
                      "request needs " + std::to_string(blocks) + " KV blocks; --cache-bytes (" +
                          std::to_string(lim.cache_bytes) + ") holds " +
                          std::to_string(lim.block_capacity));
}

}  // namespace invar
