#include "engine/scheduler.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace invar {

Scheduler::Scheduler(const SchedulerConfig& cfg, PrefixCache& cache)
    : cfg_(cfg), cache_(cache), states_(cfg.state_floats, cfg.max_running) {
  INVAR_CHECK(cfg.block_size > 0 && cfg.max_batch_tokens > 0 && cfg.max_running > 0 &&
              cfg.checkpoint_every > 0);
  INVAR_CHECK(cache.config().block_size == cfg.block_size);
  running_.reserve(static_cast<size_t>(cfg.max_running));
}

void Scheduler::enqueue(ScheduledSeq* s) {
  s->phase = SeqPhase::waiting;
  waiting_.push_back(s);
}

bool Scheduler::blocks_ensure(ScheduledSeq* s, int64_t n_positions) {
  const int64_t need = (n_positions + cfg_.block_size - 1) / cfg_.block_size;
  while (static_cast<int64_t>(s->blocks.size()) < need) {
    const int32_t b = cache_.block_acquire();
    if (b < 0) return false;
    s->blocks.push_back(b);
    s->block_ptrs.push_back(cache_.block_data(b));
  }
  return true;
}

void Scheduler::admit(ScheduledSeq* s) {
  const bool lookup = cfg_.prefix_cache && s->cache_lookup;
  PrefixHit hit;
  if (lookup) {
    const int64_t n = static_cast<int64_t>(s->tokens.size());
    hit = cache_.lookup(s->tokens, s->cache_salt, n - 1);
  }
  s->state_slot = states_.acquire();
  INVAR_CHECK(s->state_slot >= 0, "more running sequences than state slots");
  float* state = states_.data(s->state_slot);
  if (hit.n_tokens == 0 && cfg_.state_floats > 0)
    std::memset(state, 0, static_cast<size_t>(cfg_.state_floats) * sizeof(float));
  if (lookup) cache_.hit_apply(hit, state);
  s->blocks = hit.blocks;
  s->block_ptrs.clear();
  for (int32_t b : s->blocks) s->block_ptrs.push_back(cache_.block_data(b));
  s->n_done = hit.n_tokens;
  if (s->cached_tokens < 0) {
    s->cached_tokens = hit.n_tokens;
    counters_.cached_tokens += hit.n_tokens;
  }
  s->phase = SeqPhase::running;
  running_.push_back(s);
}

void Scheduler::release_all(ScheduledSeq* s) {
  for (int32_t b : s->blocks) cache_.block_release(b);
  s->blocks.clear();
  s->block_ptrs.clear();
  s->n_done = 0;
  if (s->state_slot >= 0) states_.release(s->state_slot);
  s->state_slot = -1;
}

void Scheduler::preempt(ScheduledSeq* s) {
  release_all(s);
  running_.erase(std::find(running_.begin(), running_.end(), s));
  s->phase = SeqPhase::waiting;
  waiting_.push_front(s);
  ++counters_.preemptions;
}

void Scheduler::remove(ScheduledSeq* s) {
  release_all(s);
  if (s->phase == SeqPhase::running) {
    running_.erase(std::find(running_.begin(), running_.end(), s));
  } else if (s->phase == SeqPhase::waiting) {
    const auto it = std::find(waiting_.begin(), waiting_.end(), s);
    if (it != waiting_.end()) waiting_.erase(it);
  }
  s->phase = SeqPhase::finished;
}

// A prefill chunk of up to `budget` tokens, cut where the blocks obtainable end; returns its size.
int64_t Scheduler::prefill_add(StepPlan& plan, ScheduledSeq* s, int64_t budget) {
  int64_t n = std::min(s->remaining(), budget);
  blocks_ensure(s, s->n_done + n);
  n = std::min(n, static_cast<int64_t>(s->blocks.size()) * cfg_.block_size - s->n_done);
  if (n <= 0) return 0;
  chunk_add(plan, s, n);
  return n;
}

void Scheduler::chunk_add(StepPlan& plan, ScheduledSeq* s, int64_t n) {
  if (plan.n_chunks == static_cast<int64_t>(plan.chunks.size())) plan.chunks.emplace_back();
  ChunkPlan& c = plan.chunks[static_cast<size_t>(plan.n_chunks++)];
  c.seq = s;
  c.pos0 = s->n_done;
  c.n_tokens = n;
  c.n_draft = 0;
  c.n_kept = n;
  c.checkpoint_pos.clear();
  c.checkpoint_ids.clear();
  c.checkpoint_dst.clear();
  plan.n_tokens += n;
  if (!cfg_.prefix_cache) return;
  // Rule N5: the state at every boundary this chunk passes is copied out, wherever the chunk
  // starts and ends. No slot (budget exhausted) only means a shorter future hit.
  const int64_t bs = cfg_.block_size;
  for (int64_t b = (c.pos0 / bs + 1) * bs; b <= c.pos0 + n; b += bs) {
    if ((b / bs) % cfg_.checkpoint_every != 0) continue;
    const int32_t id = cache_.checkpoint_acquire();
    if (id < 0) continue;
    c.checkpoint_pos.push_back(b);
    c.checkpoint_ids.push_back(id);
    c.checkpoint_dst.push_back(cache_.checkpoint_data(id));
  }
}

void Scheduler::schedule(StepPlan& plan, std::vector<ScheduledSeq*>& refused) {
  // Each round either plans something, or preempts (frees memory), or refuses: bounded.
  for (int64_t round = 0;; ++round) {
    plan.n_chunks = 0;
    plan.n_tokens = 0;
    int64_t budget = cfg_.max_batch_tokens;
    // 1. Decode: one token per running sequence with one token left, oldest first. Blocks
    //    come from the newest sequences if they must (preempt-and-recompute).
    int64_t decoders = 0;
    for (ScheduledSeq* s : running_) decoders += s->remaining() == 1;
    for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
      ScheduledSeq* s = running_[i];
      if (s->remaining() != 1) continue;
      --decoders;
      bool ok = blocks_ensure(s, s->n_done + 1);
      while (!ok && running_.size() > i + 1) {
        preempt(running_.back());
        ok = blocks_ensure(s, s->n_done + 1);
      }
      if (!ok) {
        preempt(s);  // the newest itself: the older ones keep their progress
        break;
      }
      // Drafts stay inside the blocks plain decoding holds now (a rejected draft must not make
      // the cache acquire, or evict for, a block plain decoding would not) and leave one token
      // of budget to every later decoder.
      const int64_t room = static_cast<int64_t>(s->blocks.size()) * cfg_.block_size - s->n_done;
      const int64_t n = std::max<int64_t>(
          1, std::min({1 + static_cast<int64_t>(s->drafts.size()), room, budget - decoders}));
      chunk_add(plan, s, n);
      plan.chunks[static_cast<size_t>(plan.n_chunks - 1)].n_draft = n - 1;
      budget -= n;
    }
    // 2. Prefill chunks of running sequences, as far as budget and blocks allow.
    for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
      ScheduledSeq* s = running_[i];
      if (s->remaining() <= 1) continue;
      budget -= prefill_add(plan, s, budget);
    }
    // 3. Admission, FIFO: only when the cache can hold the whole prompt (+ the first token).
    while (budget > 0 && static_cast<int64_t>(running_.size()) < cfg_.max_running &&
           !waiting_.empty()) {
      ScheduledSeq* s = waiting_.front();
      const int64_t need =
          (static_cast<int64_t>(s->tokens.size()) + cfg_.block_size) / cfg_.block_size;
      if (cache_.blocks_obtainable() < need) {
        if (running_.empty() && plan.n_chunks == 0) {
          waiting_.pop_front();  // nothing running will ever free enough
          s->phase = SeqPhase::finished;
          refused.push_back(s);
          continue;
        }
        break;
      }
      waiting_.pop_front();
      admit(s);
      budget -= prefill_add(plan, s, budget);
    }
    if (plan.n_chunks > 0 || running_.empty()) return;
    // Nothing could run: every running sequence waits for blocks another holds.
    INVAR_CHECK(round <= cfg_.max_running + 1, "scheduler made no progress");
    preempt(running_.back());
  }
}

void Scheduler::commit(const StepPlan& plan) {
  const int64_t bs = cfg_.block_size;
  for (int64_t k = 0; k < plan.n_chunks; ++k) {
    const ChunkPlan& c = plan.chunks[static_cast<size_t>(k)];
    ScheduledSeq* s = c.seq;
    INVAR_CHECK(s->n_done == c.pos0);
    INVAR_CHECK(
        c.n_kept >= 1 && c.n_kept <= c.n_tokens && (c.n_draft > 0 || c.n_kept == c.n_tokens),
        "kept positions outside the chunk");
    s->n_done += c.n_kept;
    size_t ci = 0;
    // Blocks below pos0 were committed by earlier steps (or came from the hit).
    for (int64_t i = c.pos0 / bs; (i + 1) * bs <= s->n_done; ++i) {
      const int64_t boundary = (i + 1) * bs;
      int32_t checkpoint = -1;
      if (ci < c.checkpoint_pos.size() && c.checkpoint_pos[ci] == boundary)
        checkpoint = c.checkpoint_ids[ci++];
      if (cfg_.prefix_cache)
        cache_.block_commit(s->blocks, i, s->tokens, s->cache_salt, checkpoint);
    }
    for (; ci < c.checkpoint_pos.size(); ++ci) {
      INVAR_CHECK(c.checkpoint_pos[ci] > s->n_done,
                  "a checkpoint did not land on a committed block");
      cache_.checkpoint_release(c.checkpoint_ids[ci]);  // it holds a state after a rejected draft
    }
  }
}

}  // namespace invar
