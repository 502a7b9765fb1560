#include "engine/scheduler.h"

#include <algorithm>
#include <cstring>
#include <tuple>

#include "cache/tier_bridge.h"
#include "core/error.h"

namespace invar {

Scheduler::Scheduler(const SchedulerConfig& cfg, PrefixCache& cache)
    : cfg_(cfg), cache_(cache), states_(cfg.state_floats, cfg.max_running) {
  INVAR_CHECK(cfg.block_size > 0 && cfg.max_batch_tokens > 0 && cfg.max_running > 0 &&
              cfg.checkpoint_every > 0);
  INVAR_CHECK(cache.config().block_size == cfg.block_size);
  running_.reserve(static_cast<size_t>(cfg.max_running));
}

void Scheduler::enqueue_group(std::span<ScheduledSeq* const> seqs) {
  INVAR_CHECK(!seqs.empty());
  const uint64_t id = next_unit_++;
  Unit& u = units_[id];
  ScheduledSeq* first = seqs[0];
  u.client = first->client;
  u.priority = first->priority;
  u.arrival = id;
  // Shared prefill: the later choices look the prompt up once the first has committed it, so
  // they must look up exactly what it computes.
  bool shared = cfg_.prefix_cache && seqs.size() > 1;
  for (ScheduledSeq* s : seqs.subspan(1))
    shared = shared && s->cache_lookup && s->cache_tokens() == first->cache_tokens() &&
             s->cache_salt == first->cache_salt;
  if (shared) u.leader = first;
  for (ScheduledSeq* s : seqs) {
    s->unit = id;
    s->phase = SeqPhase::waiting;
    u.waiting.push_back(s);
    ++u.members;
  }
  n_waiting_ += static_cast<int64_t>(seqs.size());
}

int64_t Scheduler::units_waiting() const {
  int64_t n = 0;
  for (const auto& [id, u] : units_) n += !u.waiting.empty();
  return n;
}

int64_t Scheduler::admissible(const Unit& u) {
  if (u.waiting.empty()) return 0;
  if (u.leader && u.waiting.front() != u.leader) return 0;  // the prompt is being computed
  return u.leader ? 1 : static_cast<int64_t>(u.waiting.size());
}

bool Scheduler::waits_for_shared_prefill(const ScheduledSeq& s) const {
  if (!cfg_.prefix_cache || !s.cache_lookup) return false;
  const std::vector<int32_t>& mine = s.cache_tokens();
  for (const ScheduledSeq* r : running_) {
    if (!r->cache_lookup || r->n_done >= r->n_prompt || r->cache_salt != s.cache_salt) continue;
    // Both prompts' last tokens are always computed (a lookup covers at most n - 1), so only
    // blocks before them can be shared.
    const std::vector<int32_t>& theirs = r->cache_tokens();
    const int64_t most = std::min(s.n_prompt, r->n_prompt) - 1;
    int64_t common = 0;
    while (common < most && mine[size_t(common)] == theirs[size_t(common)]) ++common;
    const int64_t shared_blocks = common / cfg_.block_size;
    if (shared_blocks > r->n_done / cfg_.block_size) return true;
  }
  return false;
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
  Unit& u = unit_of(s);
  INVAR_CHECK(!u.waiting.empty() && u.waiting.front() == s);
  u.waiting.pop_front();
  --n_waiting_;
  ++u.running;
  const bool lookup = cfg_.prefix_cache && s->cache_lookup;
  PrefixHit hit;
  if (lookup) {
    const int64_t n = static_cast<int64_t>(s->tokens.size());
    if (tiers_) tiers_->restore(s->cache_tokens(), s->cache_salt, n - 1);
    hit = cache_.lookup(s->cache_tokens(), s->cache_salt, n - 1);
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
  s->seated_step = step_;
  u.yielded_step = -1;
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
  s->selected = false;
  Unit& u = unit_of(s);
  --u.running;
  u.waiting.push_front(s);
  ++n_waiting_;
  ++counters_.preemptions;
}

void Scheduler::remove(ScheduledSeq* s) {
  release_all(s);
  Unit& u = unit_of(s);
  if (s->phase == SeqPhase::running) {
    running_.erase(std::find(running_.begin(), running_.end(), s));
    --u.running;
  } else if (s->phase == SeqPhase::waiting) {
    const auto it = std::find(u.waiting.begin(), u.waiting.end(), s);
    if (it != u.waiting.end()) {
      u.waiting.erase(it);
      --n_waiting_;
    }
  }
  s->phase = SeqPhase::finished;
  if (u.leader == s) u.leader = nullptr;  // the others compute the prompt themselves
  if (--u.members == 0) units_.erase(s->unit);
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

// Every unit's share of this step's sequences (fair_share.h), from what it could compute now.
void Scheduler::shares_compute() {
  fair_units_.clear();
  for (auto& [id, u] : units_) fair_units_.push_back(&u);
  std::sort(fair_units_.begin(), fair_units_.end(), [](const Unit* a, const Unit* b) {
    return std::tie(a->client, a->arrival) < std::tie(b->client, b->arrival);
  });
  fair_.clear();
  client_running_.clear();
  client_admitted_.clear();
  for (size_t i = 0; i < fair_units_.size(); ++i) {
    Unit& u = *fair_units_[i];
    fair_.push_back({u.client, u.running + admissible(u), 0});
    if (i == 0 || u.client != fair_units_[i - 1]->client) {
      client_running_.push_back(0);
      const auto it = client_last_.find(u.client);
      client_admitted_.push_back(it == client_last_.end() ? 0 : it->second);
    }
    u.client_group = client_running_.size() - 1;
    client_running_[u.client_group] += u.running;
  }
  // Clients with no request left are forgotten once they outnumber the live ones.
  if (client_last_.size() > 2 * client_running_.size() + 64)
    std::erase_if(client_last_, [this](const auto& kv) {
      return std::none_of(fair_units_.begin(), fair_units_.end(),
                          [&](const Unit* u) { return u->client == kv.first; });
    });
  fair_shares(fair_, cfg_.max_running, cfg_.fair_ratio);
  for (size_t i = 0; i < fair_.size(); ++i) {
    fair_units_[i]->share = fair_[i].share;
    fair_units_[i]->selected = 0;
  }
}

// Units below their share whose sequences find every slot taken get slots from the units
// furthest above theirs (their newest sequence first): a new request never waits for another's
// whole completion to end.
void Scheduler::fair_preempt() {
  int64_t need = 0;
  for (const Unit* u : fair_units_)
    if (!client_full(*u))
      need += std::min(admissible(*u), std::max<int64_t>(0, u->share - u->running));
  int64_t short_by = need - (cfg_.max_running - static_cast<int64_t>(running_.size()));
  while (short_by-- > 0) {
    Unit* victim = nullptr;
    for (Unit* u : fair_units_) {
      if (u->running <= u->share) continue;
      if (!victim ||
          std::make_tuple(u->running - u->share, u->priority, u->arrival) >
              std::make_tuple(victim->running - victim->share, victim->priority, victim->arrival))
        victim = u;
    }
    if (!victim) return;
    for (auto it = running_.rbegin(); it != running_.rend(); ++it)
      if (&unit_of(*it) == victim) {
        preempt(*it);
        --client_running_[victim->client_group];
        break;
      }
  }
}

// A client at client_max_running seats gets no more: not by admission, shares or rotation.
bool Scheduler::client_full(const Unit& u) const {
  return cfg_.client_max_running > 0 && client_running_[u.client_group] >= cfg_.client_max_running;
}

// A unit that yielded a seat has had its first token: it waits kYieldedQuanta quanta before it
// may take a seat back by rotation (a newcomer needs only one seat held a quantum), and comes
// after the units that did not yield when free seats are handed out.
bool Scheduler::rotation_waits(const Unit& u) const {
  return u.yielded_step >= 0 && step_ - u.yielded_step < kYieldedQuanta * cfg_.seat_quantum;
}

// Positions a sequence preempted now recomputes when it is admitted again, while the cache
// keeps its blocks: those after its last block boundary (a lookup covers at most n − 1), or all
// of them when it must not look up (prompt logprobs).
int64_t Scheduler::resume_cost(const ScheduledSeq& s) const {
  const auto n = static_cast<int64_t>(s.tokens.size());
  if (!cfg_.prefix_cache || !s.cache_lookup) return n;
  return n - (n - 1) / cfg_.block_size * cfg_.block_size;
}

// Shares alone never free a seat when every unit holds no more than its share: 64 single-choice
// requests on 64 seats keep them until they end, and a 65th waits for a whole completion.
// Seat rotation bounds that wait: a sequence that has held its seat for seat_quantum steps
// yields it to a unit below its share (preempted, it resumes later from the prefix cache —
// the same bits, C1 — recomputing at most the positions after its last block boundary).
// Among the seats held a quantum, victims come from the client holding the most seats, then the
// one that resumes cheapest (a sequence just past a block boundary recomputes one position),
// then the oldest seat. A unit that yielded claims a seat this way only after waiting several
// quanta, so one newcomer costs one rotation, not a cascade, and a yielded request costs at most
// a block's recomputation per kYieldedQuanta quanta even when requests outnumber seats.
void Scheduler::seats_rotate() {
  if (cfg_.seat_quantum <= 0) return;
  int64_t want = 0;
  for (const Unit* u : fair_units_)
    if (u->running < u->share && admissible(*u) > 0 && !rotation_waits(*u) && !client_full(*u) &&
        !waits_for_shared_prefill(*u->waiting.front()))
      want += std::min(admissible(*u), u->share - u->running);
  int64_t short_by = want - (cfg_.max_running - static_cast<int64_t>(running_.size()));
  for (; short_by > 0; --short_by) {
    ScheduledSeq* victim = nullptr;
    auto key = [this](const ScheduledSeq* s) {
      const Unit& u = units_.at(s->unit);
      return std::make_tuple(client_running_[u.client_group], -resume_cost(*s), -s->seated_step,
                             u.priority, u.arrival);
    };
    for (ScheduledSeq* s : running_) {
      const Unit& u = unit_of(s);
      if (u.running < u.share || step_ - s->seated_step < cfg_.seat_quantum) continue;
      if (!victim || key(s) > key(victim)) victim = s;
    }
    if (!victim) return;
    Unit& v = unit_of(victim);
    preempt(victim);
    v.yielded_step = step_;
    --client_running_[v.client_group];
    ++counters_.seat_rotations;
  }
}

// Each unit computes at most its share of its running sequences this step: those that
// computed least recently, then in admission order.
void Scheduler::running_select() {
  picks_.clear();
  for (size_t i = 0; i < running_.size(); ++i) picks_.push_back({running_[i]->last_step, 0, i});
  std::sort(picks_.begin(), picks_.end());
  for (const Pick& p : picks_) {
    ScheduledSeq* s = running_[p.index];
    Unit& u = unit_of(s);
    s->selected = u.selected < u.share;
    u.selected += s->selected;
  }
}

// Decode: one token per selected running sequence with one token left, oldest first. Blocks
// come from the newest sequences if they must (preempt-and-recompute).
void Scheduler::decode_plan(StepPlan& plan, int64_t& budget) {
  int64_t decoders = 0;
  for (ScheduledSeq* s : running_) decoders += s->selected && s->remaining() == 1;
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    ScheduledSeq* s = running_[i];
    if (!s->selected || s->remaining() != 1) continue;
    --decoders;
    bool ok = blocks_ensure(s, s->n_done + 1);
    while (!ok && running_.size() > i + 1) {
      decoders -= running_.back()->selected && running_.back()->remaining() == 1;
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
    s->selected = false;  // it has its chunk
  }
}

// Drafts cut where the sequence's blocks end run on into one more block when the step has
// budget no one else took and the cache a block free without evicting (plain decoding may never
// need it: the request can end first), so a rejected draft still never makes the cache evict or
// preempt anything. The chunk stops short of that block's end, whose checkpoint would have to be
// acquired; commit() gives the block back when no kept position reached it.
void Scheduler::drafts_extend(StepPlan& plan) {
  const int64_t bs = cfg_.block_size;
  for (int64_t k = 0; k < plan.n_chunks && plan.n_tokens < cfg_.max_batch_tokens; ++k) {
    ChunkPlan& c = plan.chunks[static_cast<size_t>(k)];
    ScheduledSeq* s = c.seq;
    const int64_t end = static_cast<int64_t>(s->blocks.size()) * bs;
    const int64_t want = std::min(static_cast<int64_t>(s->drafts.size()) - c.n_draft,
                                  cfg_.max_batch_tokens - plan.n_tokens);
    if (c.n_tokens != c.n_draft + 1 || c.pos0 + c.n_tokens != end || want <= 0 ||
        s->remaining() != 1 || bs < 2)
      continue;
    const int32_t b = cache_.block_acquire_spare();
    if (b < 0) return;
    s->blocks.push_back(b);
    s->block_ptrs.push_back(cache_.block_data(b));
    const int64_t n = std::min(want, bs - 1);
    c.n_tokens += n;
    c.n_draft += n;
    c.n_kept = c.n_tokens;
    plan.n_tokens += n;
  }
}

// Admission: units below their share first, those waiting out a yielded seat after the others;
// among them the client with the fewest running sequences, then the client admitted least
// recently (round-robin), then within the client by priority, then the unit with the fewest
// running, then arrival. Units of a client at client_max_running wait. Units at or above their
// share take only slots no one below wants; at most one admission per token of budget. A
// sequence is admitted only when the cache can hold its whole prompt (+ the first token) beside
// what this step's admissions need.
void Scheduler::admission_plan(StepPlan& plan, int64_t budget,
                               std::vector<ScheduledSeq*>& refused) {
  int64_t reserved = 0;  // blocks this step's admissions will still acquire
  for (int64_t admitted = 0;
       admitted < budget && static_cast<int64_t>(running_.size()) < cfg_.max_running;) {
    Unit* best = nullptr;
    auto key = [this](const Unit* u) {
      return std::make_tuple(u->running >= u->share, rotation_waits(*u),
                             client_running_[u->client_group], client_admitted_[u->client_group],
                             u->priority, u->running, u->arrival);
    };
    for (Unit* u : fair_units_)
      if (admissible(*u) > 0 && !client_full(*u) && (!best || key(u) < key(best)) &&
          !waits_for_shared_prefill(*u->waiting.front()))
        best = u;
    if (!best) return;
    ScheduledSeq* s = best->waiting.front();
    const int64_t need =
        (static_cast<int64_t>(s->tokens.size()) + cfg_.block_size) / cfg_.block_size;
    if (cache_.blocks_obtainable() - reserved < need) {
      if (running_.empty() && plan.n_chunks == 0) {
        best->waiting.pop_front();  // nothing running will ever free enough
        --n_waiting_;
        s->phase = SeqPhase::finished;
        refused.push_back(s);
        continue;
      }
      return;
    }
    admit(s);
    ++client_running_[best->client_group];
    client_admitted_[best->client_group] = client_last_[best->client] = ++admissions_;
    reserved += need - static_cast<int64_t>(s->blocks.size());
    s->selected = best->selected < best->share;
    best->selected += s->selected;
    ++admitted;
  }
}

// Prefill chunks of the selected running sequences without a chunk yet (those admitted in this
// step included, whose prompt may be a single token): the budget split max-min fair across
// clients, then across each client's units, then in admission order within a unit.
void Scheduler::prefill_plan(StepPlan& plan, int64_t& budget) {
  picks_.clear();
  for (size_t i = 0; i < running_.size(); ++i) {
    const ScheduledSeq* s = running_[i];
    if (!s->selected || s->remaining() < 1) continue;
    const Unit& u = units_.at(s->unit);
    picks_.push_back({static_cast<int64_t>(u.client_group), u.arrival, i});
  }
  if (picks_.empty() || budget <= 0) return;
  std::sort(picks_.begin(), picks_.end());  // by client, then unit, then admission
  // [starts_[g], starts_[g + 1]) are the picks of client g.
  starts_.clear();
  demand_.clear();
  for (size_t i = 0; i < picks_.size(); ++i) {
    if (i == 0 || picks_[i].key0 != picks_[i - 1].key0) {
      starts_.push_back(i);
      demand_.push_back(0);
    }
    demand_.back() += running_[picks_[i].index]->remaining();
  }
  starts_.push_back(picks_.size());
  alloc_.resize(demand_.size());
  fair_split(demand_, budget, alloc_);
  int64_t used = 0;
  for (size_t g = 0; g + 1 < starts_.size(); ++g) {
    // The client's part across its units.
    unit_demand_.clear();
    for (size_t i = starts_[g]; i < starts_[g + 1]; ++i) {
      if (i == starts_[g] || picks_[i].key1 != picks_[i - 1].key1) unit_demand_.push_back(0);
      unit_demand_.back() += running_[picks_[i].index]->remaining();
    }
    unit_alloc_.resize(unit_demand_.size());
    fair_split(unit_demand_, alloc_[g], unit_alloc_);
    size_t unit = 0;
    for (size_t i = starts_[g]; i < starts_[g + 1]; ++i) {
      if (i > starts_[g] && picks_[i].key1 != picks_[i - 1].key1) ++unit;
      const int64_t n = prefill_add(plan, running_[picks_[i].index], unit_alloc_[unit]);
      unit_alloc_[unit] -= n;
      used += n;
    }
  }
  budget -= used;
}

void Scheduler::schedule(StepPlan& plan, std::vector<ScheduledSeq*>& refused) {
  ++step_;
  // Each round either plans something, or preempts (frees memory), or refuses: bounded.
  for (int64_t round = 0;; ++round) {
    plan.n_chunks = 0;
    plan.n_tokens = 0;
    int64_t budget = cfg_.max_batch_tokens;
    shares_compute();
    fair_preempt();
    seats_rotate();
    running_select();
    decode_plan(plan, budget);
    admission_plan(plan, budget, refused);
    prefill_plan(plan, budget);
    if (plan.n_chunks > 0 || running_.empty()) {
      drafts_extend(plan);
      break;
    }
    // Nothing could run: every running sequence waits for blocks another holds.
    INVAR_CHECK(round <= cfg_.max_running + 1, "scheduler made no progress");
    preempt(running_.back());
  }
  for (int64_t k = 0; k < plan.n_chunks; ++k)
    plan.chunks[static_cast<size_t>(k)].seq->last_step = step_;
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
        cache_.block_commit(s->blocks, i, s->cache_tokens(), s->cache_salt, checkpoint);
    }
    for (; ci < c.checkpoint_pos.size(); ++ci) {
      INVAR_CHECK(c.checkpoint_pos[ci] > s->n_done,
                  "a checkpoint did not land on a committed block");
      cache_.checkpoint_release(c.checkpoint_ids[ci]);  // it holds a state after a rejected draft
    }
    // A block drafts_extend() took that no kept position reached goes back: the sequence holds
    // what plain decoding would.
    if (c.n_draft > 0)
      while (static_cast<int64_t>(s->blocks.size()) * bs > s->n_done + bs - 1 &&
             !s->blocks.empty()) {
        cache_.block_release(s->blocks.back());
        s->blocks.pop_back();
        s->block_ptrs.pop_back();
      }
    // Its prompt is in the cache now: the unit's other choices may look it up.
    Unit& u = unit_of(s);
    if (u.leader == s && s->n_done >= s->n_prompt) u.leader = nullptr;
  }
}

}  // namespace invar
