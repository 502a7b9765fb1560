#include "engine/postprocess.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "engine/request.h"
#include "tokenizer/token_types.h"
#include "tokenizer/tokenizer.h"

namespace invar {

namespace {

bool row_finite(const float* row, int64_t n_vocab) {
  for (int64_t i = 0; i < n_vocab; ++i)
    if (!std::isfinite(row[i])) return false;
  return true;
}

// A NaN or Inf logit would reach the response as a NaN logprob or a token drawn from garbage:
// the request ends with an error instead (ErrorKind::nonfinite). One pass over the row,
// ~n_vocab compares next to the n_vocab·E multiply-adds that made it.
void require_finite(const float* row, int64_t n_vocab, int64_t position) {
  for (int64_t i = 0; i < n_vocab; ++i)
    if (!std::isfinite(row[i]))
      throw EngineError(ErrorKind::nonfinite, "",
                        "the model computed a non-finite logit (" +
                            std::string(std::isnan(row[i]) ? "NaN" : "Inf") + " for token " +
                            std::to_string(i) + ") at position " + std::to_string(position) +
                            ": the model file's weights are damaged for this input");
}

}  // namespace

std::string_view Postprocessor::token_text_bytes(const GenerationRequest& r, int32_t id) const {
  const auto& types = tokenizer_->vocab().token_types;
  const bool control = size_t(id) < types.size() && types[size_t(id)] == token_type::kControl;
  if (r.skip_special_tokens && control) return {};
  return tokenizer_->token_bytes(id);
}

Postprocessor::Postprocessor(const Tokenizer* tokenizer, int64_t n_vocab, int64_t n_ctx)
    : tokenizer_(tokenizer), n_vocab_(n_vocab), n_ctx_(n_ctx) {}

void Postprocessor::logits_capture(Sequence& s, int64_t pos0, int64_t n, const float* rows) {
  const auto V = static_cast<size_t>(n_vocab_);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t p = pos0 + j;
    if (p < s.logits_reported) continue;  // recomputed after a preemption
    const float* r = rows + static_cast<size_t>(j) * V;
    require_finite(r, n_vocab_, p);
    s.logits_pending.emplace_back(p, std::vector<float>(r, r + V));
    s.logits_reported = p + 1;
  }
}

void Postprocessor::prompt_logprobs_emit(Sequence& s, const ChunkPlan& c, const float* rows,
                                         std::vector<RequestEvent>& out) {
  for (int64_t j = 0; j < c.n_tokens; ++j) {
    const int64_t target = c.pos0 + j + 1;  // row j predicts the token after it
    if (target >= s.n_prompt || target < s.prompt_lp_reported) continue;
    RequestEvent ev;
    ev.kind = EventKind::prompt_logprobs;
    ev.position = target;
    ev.token = s.tokens[static_cast<size_t>(target)];
    require_finite(rows + static_cast<size_t>(j * n_vocab_), n_vocab_, target);
    logprobs_top(rows + static_cast<size_t>(j * n_vocab_), n_vocab_, ev.token,
                 *s.req.prompt_logprobs, scratch_, &ev.logprob, &ev.top);
    s.prompt_lp_reported = target + 1;
    out.push_back(std::move(ev));
  }
}

void Postprocessor::samples_prefetch(const StepPlan& plan,
                                     const std::function<const float*(int64_t)>& rows_of,
                                     ThreadPool& pool) {
  ahead_.clear();
  ahead_next_ = 0;
  // The chunks process() ends with token_emit on their last row, that row alone deciding.
  for (int64_t k = 0; k < plan.n_chunks; ++k) {
    const ChunkPlan& c = plan.chunks[static_cast<size_t>(k)];
    const Sequence& s = sequence_of(c.seq);
    if (c.n_draft > 0 || s.constraint || eog_masked(s)) continue;
    if (c.pos0 + c.n_tokens < static_cast<int64_t>(s.tokens.size())) continue;
    if (s.n_generated >= s.req.max_tokens) continue;
    const float* rows = rows_of(k);
    SampledAhead a;
    a.seq = &s;
    a.row = s.wants_all_logits() ? rows + static_cast<size_t>((c.n_tokens - 1) * n_vocab_) : rows;
    a.position = static_cast<int64_t>(s.tokens.size());
    ahead_.push_back(std::move(a));
  }
  if (ahead_.size() < 2) {  // nothing to share out: token_emit samples as before
    ahead_.clear();
    return;
  }
  pool_scratch_.resize(static_cast<size_t>(pool.size()));
  pool_penalties_.resize(static_cast<size_t>(pool.size()));
  // Rows cost unequal times (a flat row sorts more candidates): threads take them as they go.
  pool.parallel_balanced(
      static_cast<int64_t>(ahead_.size()), 1, [&](int64_t begin, int64_t end, int t) {
        for (int64_t j = begin; j < end; ++j) {
          SampledAhead& a = ahead_[static_cast<size_t>(j)];
          const Sequence& s = *a.seq;
          if (!row_finite(a.row, n_vocab_)) continue;
          SamplerScratch& sc = pool_scratch_[static_cast<size_t>(t)];
          const float* penalised =
              penalties_apply(a.row, n_vocab_, s.req.sampling, s.tokens, s.n_prompt,
                              pool_penalties_[static_cast<size_t>(t)]);
          a.token = sample_token(penalised, n_vocab_, s.req.sampling, a.position, sc);
          logprobs_top(a.row, n_vocab_, a.token, s.req.top_logprobs, sc, &a.logprob, &a.top);
        }
      });
}

Postprocessor::SampledAhead* Postprocessor::ahead_find(const Sequence& s, const float* row,
                                                       int64_t position) {
  for (size_t n = 0; n < ahead_.size(); ++n) {
    SampledAhead& a = ahead_[(ahead_next_ + n) % ahead_.size()];
    if (a.seq == &s && a.row == row && a.position == position && a.token >= 0) {
      a.row = nullptr;
      ahead_next_ = (ahead_next_ + n + 1) % ahead_.size();
      return &a;
    }
  }
  return nullptr;
}

const float* Postprocessor::eog_mask(const float* row, const std::vector<int32_t>& stops) {
  if (row != mask_scratch_.data()) mask_scratch_.assign(row, row + n_vocab_);
  std::vector<float>& m = mask_scratch_;
  const float off = -std::numeric_limits<float>::infinity();
  // A grammar that allows nothing but the end (its output complete) keeps it: min_tokens
  // never makes a constrained output invalid.
  std::vector<float>& kept = eog_kept_;
  kept.clear();
  for (int32_t id : stops) kept.push_back(m[static_cast<size_t>(id)]);
  for (int32_t id : stops) m[static_cast<size_t>(id)] = off;
  for (int64_t i = 0; i < n_vocab_; ++i)
    if (m[static_cast<size_t>(i)] != off) return m.data();
  for (size_t j = 0; j < stops.size(); ++j) m[static_cast<size_t>(stops[j])] = kept[j];
  return m.data();
}

FinishReason Postprocessor::token_emit(Sequence& s, const float* row, TextAssembler* text,
                                       std::vector<RequestEvent>& out) {
  const int64_t position = static_cast<int64_t>(s.tokens.size());
  RequestEvent ev;
  ev.kind = EventKind::token;
  ev.position = position;
  require_finite(row, n_vocab_, position);
  SampledAhead* ahead = ahead_find(s, row, position);
  if (ahead) {
    ev.token = ahead->token;
    ev.logprob = ahead->logprob;
    ev.top = std::move(ahead->top);
  } else {
    // Penalties see s.tokens, the verified sequence: in a verification chunk the drafts kept so
    // far are its last tokens, exactly as plain decoding would have generated them.
    const float* penalised =
        penalties_apply(row, n_vocab_, s.req.sampling, s.tokens, s.n_prompt, penalty_scratch_);
    const float* allowed =
        s.constraint ? s.constraint->masked(penalised, n_vocab_, mask_scratch_) : penalised;
    if (eog_masked(s)) allowed = eog_mask(allowed, s.req.stop_tokens);
    ev.token = sample_token(allowed, n_vocab_, s.req.sampling, position, scratch_);
    // Logprobs of the model's own row (vLLM's default logprobs_mode, raw_logprobs).
    logprobs_top(row, n_vocab_, ev.token, s.req.top_logprobs, scratch_, &ev.logprob, &ev.top);
  }
  if (s.constraint) s.constraint->advance(ev.token);
  ev.logits = std::move(s.logits_pending);
  s.logits_pending.clear();
  s.tokens.push_back(ev.token);
  if (!s.key_tokens.empty()) s.key_tokens.push_back(ev.token);
  ++s.n_generated;
  ++generated_total_;
  const auto& stops = s.req.stop_tokens;
  // A grammar that took an end-of-sequence id is complete: nothing may follow it, even when
  // the caller ignores end of sequence.
  ev.stop_token = std::find(stops.begin(), stops.end(), ev.token) != stops.end() ||
                  (s.constraint && s.constraint->terminated());
  if (text && !ev.stop_token)
    ev.text =
        text->push(token_text_bytes(s.req, ev.token), s.n_generated >= s.req.sampling.min_tokens);
  const bool stop = ev.stop_token || (text && text->stopped());
  out.push_back(std::move(ev));
  if (stop) return FinishReason::stop;
  if (s.n_generated >= s.req.max_tokens || position + 1 >= n_ctx_) return FinishReason::length;
  return FinishReason::none;
}

// Row j holds the logits a decode step of position pos0 + j would compute (chunk invariance),
// valid while every token before it is verified: the last token is, and draft j − 1 is when it
// equals the token row j − 1 gave.
ChunkOutcome Postprocessor::drafts_verify(Sequence& s, const ChunkPlan& c, const float* rows,
                                          TextAssembler* text, std::vector<RequestEvent>& out) {
  ChunkOutcome o;
  for (int64_t j = 0; j <= c.n_draft; ++j) {
    const float* row = rows + static_cast<size_t>(j * n_vocab_);
    if (s.req.capture_logits) logits_capture(s, c.pos0 + j, 1, row);
    o.n_kept = j + 1;
    o.finish = token_emit(s, row, text, out);
    const bool accepted = j < c.n_draft && s.tokens.back() == s.drafts[static_cast<size_t>(j)];
    o.n_accepted += accepted;
    if (o.finish != FinishReason::none || !accepted) break;
  }
  return o;
}

ChunkOutcome Postprocessor::process(const ChunkPlan& c, const float* rows, TextAssembler* text,
                                    std::vector<RequestEvent>& out) {
  Sequence& s = sequence_of(c.seq);
  if (c.n_draft > 0) return drafts_verify(s, c, rows, text, out);
  ChunkOutcome o;
  o.n_kept = c.n_tokens;
  if (s.req.capture_logits) logits_capture(s, c.pos0, c.n_tokens, rows);
  if (s.req.prompt_logprobs) prompt_logprobs_emit(s, c, rows, out);
  // Prompt not finished yet: the chunk ends before the last token.
  if (c.pos0 + c.n_tokens < static_cast<int64_t>(s.tokens.size())) return o;
  if (s.n_generated >= s.req.max_tokens) {
    o.finish = FinishReason::length;
    return o;
  }
  const float* last =
      s.wants_all_logits() ? rows + static_cast<size_t>((c.n_tokens - 1) * n_vocab_) : rows;
  o.finish = token_emit(s, last, text, out);
  return o;
}

}  // namespace invar
