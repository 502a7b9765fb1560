#include "engine/request_check.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

namespace invar {
namespace {

constexpr double kInt32Max = double(std::numeric_limits<int32_t>::max());

RequestFault fault_other(const char* param, std::string message) {
  RequestFault f;
  f.param = param;
  f.message = std::move(message);
  return f;
}

// `got` outside [lo, hi] ((lo, hi] when lo_open): the engine says "x must be in [lo, hi]".
RequestFault fault_range(const char* param, double lo, double hi, bool lo_open, double got) {
  RequestFault f;
  f.param = param;
  f.rule = FaultRule::range;
  f.lo = lo, f.hi = hi, f.got = got, f.lo_open = lo_open;
  char buf[128];
  std::snprintf(buf, sizeof buf, "%s must be in %s%g, %g]", param, lo_open ? "(" : "[", lo, hi);
  f.message = buf;
  return f;
}

RequestFault fault_int_range(const char* param, int64_t lo, int64_t hi, int64_t got) {
  RequestFault f = fault_range(param, double(lo), double(hi), false, double(got));
  f.integral = true;
  f.message = std::string(param) + " must be in " + std::to_string(lo) + ".." + std::to_string(hi);
  return f;
}

bool outside(double x, double lo, double hi, bool lo_open) {
  return !((lo_open ? x > lo : x >= lo) && x <= hi);  // NaN is outside
}

RequestFault fault_token(const char* param, int64_t index, int32_t id, int64_t n_vocab,
                         std::string message) {
  RequestFault f;
  f.param = param;
  f.rule = FaultRule::not_a_token;
  f.index = index;
  f.got = id;
  f.hi = double(n_vocab);
  f.integral = true;
  f.message = std::move(message);
  return f;
}

std::optional<RequestFault> sampling_fault(const SamplingParams& sp) {
  if (outside(sp.temperature, 0, 2, false))
    return fault_range("temperature", 0, 2, false, sp.temperature);
  if (outside(sp.top_p, 0, 1, true)) return fault_range("top_p", 0, 1, true, sp.top_p);
  if (sp.min_tokens < 0 || sp.min_tokens > int64_t(kInt32Max))
    return fault_int_range("min_tokens", 0, int64_t(kInt32Max), sp.min_tokens);
  if (sp.top_k < -1 || sp.top_k > int64_t(kInt32Max))  // -1 and 0: off
    return fault_int_range("top_k", -1, int64_t(kInt32Max), sp.top_k);
  if (outside(sp.min_p, 0, 1, false)) return fault_range("min_p", 0, 1, false, sp.min_p);
  for (size_t i = 0; i < sp.logit_bias.size(); ++i)
    if (const float bias = sp.logit_bias[i].second; outside(bias, -100, 100, false)) {
      RequestFault f = fault_range("logit_bias", -100, 100, false, bias);
      f.index = int64_t(i);
      f.message = "logit_bias values must be in [-100, 100]";
      return f;
    }
  if (outside(sp.repetition_penalty, 0, 100, true))
    return fault_range("repetition_penalty", 0, 100, true, sp.repetition_penalty);
  if (sp.repetition_last_n < -1 || sp.repetition_last_n > int64_t(kInt32Max))  // -1: all
    return fault_int_range("repeat_last_n", -1, int64_t(kInt32Max), sp.repetition_last_n);
  if (outside(sp.frequency_penalty, -2, 2, false))
    return fault_range("frequency_penalty", -2, 2, false, sp.frequency_penalty);
  if (outside(sp.presence_penalty, -2, 2, false))
    return fault_range("presence_penalty", -2, 2, false, sp.presence_penalty);
  return std::nullopt;
}

}  // namespace

int64_t context_limit(const Hparams& hp, int64_t n_ctx_flag) {
  if (n_ctx_flag > 0) return n_ctx_flag;
  return hp.n_ctx_train > 0 ? hp.n_ctx_limit() : int64_t(1) << 20;
}

std::optional<RequestFault> request_fields_fault(const GenerationRequest& r) {
  if (auto f = sampling_fault(r.sampling)) return f;
  if (r.sampling.min_tokens > r.max_tokens) {
    RequestFault f = fault_other("min_tokens",
                                 "min_tokens (" + std::to_string(r.sampling.min_tokens) +
                                     ") exceeds max_tokens (" + std::to_string(r.max_tokens) + ")");
    f.rule = FaultRule::exceeds;
    f.got = double(r.sampling.min_tokens);
    f.hi = double(r.max_tokens);
    f.integral = true;
    return f;
  }
  if (r.top_logprobs < 0 || r.top_logprobs > kTopLogprobsMax)
    return fault_int_range("top_logprobs", 0, kTopLogprobsMax, r.top_logprobs);
  if (r.prompt_logprobs && (*r.prompt_logprobs < 0 || *r.prompt_logprobs > kTopLogprobsMax))
    return fault_int_range("prompt_logprobs", 0, kTopLogprobsMax, *r.prompt_logprobs);
  for (size_t i = 0; i < r.stop_strings.size(); ++i)
    if (r.stop_strings[i].empty()) {
      RequestFault f = fault_other("stop", "a stop string is empty");
      f.rule = FaultRule::empty;
      f.index = int64_t(i);
      return f;
    }
  return std::nullopt;
}

std::optional<RequestFault> request_context_fault(int64_t prompt, int64_t max_tokens,
                                                  int64_t n_ctx) {
  const int64_t total = prompt + max_tokens;
  if (total <= n_ctx) return std::nullopt;
  RequestFault f =
      fault_other("max_tokens", "prompt (" + std::to_string(prompt) + " tokens) + max_tokens (" +
                                    std::to_string(max_tokens) + ") exceeds the context limit of " +
                                    std::to_string(n_ctx) + " tokens");
  f.kind = ErrorKind::context_overflow;
  f.rule = FaultRule::context;
  f.lo = double(prompt), f.got = double(total), f.hi = double(n_ctx);
  f.integral = true;
  return f;
}

std::optional<RequestFault> request_fault(const GenerationRequest& r, const RequestLimits& lim) {
  if (r.prompt.empty()) {
    RequestFault f = fault_other("prompt", "prompt is empty");
    f.rule = FaultRule::empty;
    return f;
  }
  for (size_t i = 0; i < r.prompt.size(); ++i)
    if (r.prompt[i] < 0 || r.prompt[i] >= lim.n_vocab)
      return fault_token("prompt", int64_t(i), r.prompt[i], lim.n_vocab,
                         "prompt token " + std::to_string(i) + " has id " +
                             std::to_string(r.prompt[i]) + ", outside the vocabulary [0, " +
                             std::to_string(lim.n_vocab) + ")");
  if (r.max_tokens < 0) return fault_int_range("max_tokens", 0, int64_t(kInt32Max), r.max_tokens);
  if (r.images) {
    if (!lim.imrope)
      return fault_other("images", "this model reads no images (no IMROPE positions)");
    try {
      r.images->check(r.prompt, lim.n_embd);
    } catch (const Error& e) {
      return fault_other("images", e.what());
    }
  }
  if (auto f = request_context_fault(int64_t(r.prompt.size()), r.max_tokens, lim.n_ctx)) return f;
  for (size_t i = 0; i < r.sampling.logit_bias.size(); ++i)
    if (const int32_t id = r.sampling.logit_bias[i].first; id < 0 || id >= lim.n_vocab)
      return fault_token("logit_bias", int64_t(i), id, lim.n_vocab,
                         "logit_bias names token " + std::to_string(id) +
                             ", outside the vocabulary [0, " + std::to_string(lim.n_vocab) + ")");
  if (auto f = request_fields_fault(r)) return f;
  for (size_t i = 0; i < r.stop_tokens.size(); ++i)
    if (const int32_t t = r.stop_tokens[i]; t < 0 || t >= lim.n_vocab)
      return fault_token("stop", int64_t(i), t, lim.n_vocab,
                         "stop token " + std::to_string(t) + " is not in the vocabulary");
  if (!r.stop_strings.empty() && !lim.has_tokenizer)
    return fault_other("stop", "stop strings need a tokenizer; this engine has none");
  if (r.grammar && !lim.has_tokenizer)
    return fault_other("response_format",
                       "structured output needs a tokenizer; this engine has none");
  if (r.grammar_after >= lim.n_vocab)
    return fault_other("response_format", "grammar_after " + std::to_string(r.grammar_after) +
                                              " is not in the vocabulary");
  const int64_t total = int64_t(r.prompt.size()) + r.max_tokens;
  const int64_t blocks = (total + 1 + lim.block_size - 1) / lim.block_size;
  if (blocks > lim.block_capacity) {
    RequestFault f = fault_other("max_tokens", "request needs " + std::to_string(blocks) +
                                                   " KV blocks; --cache-bytes (" +
                                                   std::to_string(lim.cache_bytes) + ") holds " +
                                                   std::to_string(lim.block_capacity));
    f.kind = ErrorKind::context_overflow;
    return f;
  }
  return std::nullopt;
}

void request_check(const GenerationRequest& r, const RequestLimits& lim) {
  if (auto f = request_fault(r, lim)) throw EngineError(f->kind, f->param, f->message);
}

}  // namespace invar
