#include "engine/spec_decode.h"

#include <algorithm>
#include <cstring>

namespace invar {

SpecDecoder::SpecDecoder(std::unique_ptr<Drafter> drafter, const DrafterConfig& cfg,
                         int64_t n_vocab, int64_t n_ctx, const BlockHidden& hidden)
    : drafter_(std::move(drafter)), cfg_(cfg), hidden_(hidden), n_vocab_(n_vocab), n_ctx_(n_ctx) {
  if (on()) hist_.assign(static_cast<size_t>(cfg.max_k + 1), 0);
  if (hidden_.on()) zeros_.assign(static_cast<size_t>(hidden_.row_floats()), 0.0f);
}

void SpecDecoder::seq_begin(Sequence& s) {
  if (on()) s.draft_state = drafter_->seq_make(s.req.prompt);
}

void SpecDecoder::propose(const std::vector<ScheduledSeq*>& running, ThreadPool& pool) {
  if (!on()) return;
  jobs_.clear();
  for (ScheduledSeq* q : running) {
    Sequence& s = sequence_of(q);
    s.drafts.clear();
    if (s.remaining() != 1) continue;
    // Plain decoding emits at most max_tokens − n_generated more tokens and computes no
    // position ≥ n_ctx − 1; a verification chunk of 1 + k rows emits at most k + 1.
    const int64_t n_tokens = static_cast<int64_t>(s.tokens.size());
    const int64_t k =
        std::min({cfg_.max_k, s.req.max_tokens - s.n_generated - 1, n_ctx_ - 1 - n_tokens});
    if (k < 1) continue;
    DraftJob j;
    j.seq = s.draft_state.get();
    j.tokens = s.tokens;
    j.max_k = k;
    j.out = &s.drafts;
    jobs_.push_back(j);
  }
  if (!jobs_.empty()) drafter_->propose(jobs_, pool);
  // A draft outside the vocabulary (a drafter's bug) ends the proposal: it can only be wrong.
  for (DraftJob& j : jobs_) {
    auto& d = *j.out;
    if (static_cast<int64_t>(d.size()) > j.max_k) d.resize(static_cast<size_t>(j.max_k));
    const auto bad =
        std::find_if(d.begin(), d.end(), [&](int32_t t) { return t < 0 || t >= n_vocab_; });
    d.erase(bad, d.end());
  }
}

void SpecDecoder::chunk_done(Sequence& s, const ChunkPlan& c, const ChunkOutcome& o,
                             const float* hidden) {
  if (!on()) return;
  if (hidden && drafter_->wants_hidden()) {
    if (hidden_.on()) {
      hidden_restore(s, c.pos0);
      hidden_store(s, c.pos0, o.n_kept, hidden);
    }
    drafter_->hidden_observe(*s.draft_state, c.pos0, o.n_kept, hidden);
    s.hidden_observed = std::max(s.hidden_observed, c.pos0 + o.n_kept);
  }
  if (c.n_draft == 0) return;
  s.n_drafted += c.n_draft;
  s.n_accepted += o.n_accepted;
  drafted_ += static_cast<uint64_t>(c.n_draft);
  accepted_ += static_cast<uint64_t>(o.n_accepted);
  ++verifications_;
  ++hist_[static_cast<size_t>(o.n_accepted)];
  drafter_->accepted(*s.draft_state, s.tokens, c.n_draft, o.n_accepted);
}

// Positions [s.hidden_observed, end) came from the cache: the drafter observes the rows their
// blocks keep, block by block (zeros for a block restored from a record without them).
void SpecDecoder::hidden_restore(Sequence& s, int64_t end) {
  const int64_t bs = hidden_.block_size, E = hidden_.n_embd;
  for (int64_t p = s.hidden_observed; p < end;) {
    const float* block = s.block_ptrs[static_cast<size_t>(p / bs)];
    const int64_t n = std::min(end, (p / bs + 1) * bs) - p;
    const float* rows = hidden_.present(block) ? hidden_.rows(block) : zeros_.data();
    drafter_->hidden_observe(*s.draft_state, p, n, rows + (p % bs) * E);
    p += n;
  }
  s.hidden_observed = std::max(s.hidden_observed, end);
}

// The rows of kept positions [pos0, pos0 + n) into the blocks that hold those positions. A block
// is written from its first position on (blocks below a hit's end are never written), so once
// full and committed every row is the trunk's.
void SpecDecoder::hidden_store(Sequence& s, int64_t pos0, int64_t n, const float* hidden) const {
  const int64_t bs = hidden_.block_size, E = hidden_.n_embd;
  for (int64_t p = pos0; p < pos0 + n;) {
    float* block = s.block_ptrs[static_cast<size_t>(p / bs)];
    const int64_t m = std::min(pos0 + n, (p / bs + 1) * bs) - p;
    std::memcpy(hidden_.rows(block) + (p % bs) * E, hidden + (p - pos0) * E,
                static_cast<size_t>(m * E) * sizeof(float));
    hidden_.present_set(block, true);
    p += m;
  }
}

void SpecDecoder::metrics_fill(EngineMetrics& m) const {
  m.spec_drafted_total = drafted_;
  m.spec_accepted_total = accepted_;
  m.spec_verifications_total = verifications_;
  m.spec_accepted_hist = hist_;
}

}  // namespace invar
