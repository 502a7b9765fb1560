// The engine thread: each step takes what callers sent (request queue), plans the batch
// (scheduler), runs it (model runner) and turns the logits into events (postprocess).
#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "cache/block_hidden.h"
#include "cache/lower_tiers.h"
#include "cache/prefix_cache.h"
#include "cache/tier_bridge.h"
#include "engine/constraint.h"
#include "engine/drafter_make.h"
#include "engine/mask_prefetch.h"
#include "engine/model_runner.h"
#include "engine/postprocess.h"
#include "engine/request_check.h"
#include "engine/request_queue.h"
#include "engine/scheduler.h"
#include "engine/spec_decode.h"
#include "tokenizer/tokenizer.h"

namespace invar {

namespace {

// Each running sequence's share of --grammar-state-bytes; at least a byte, so that a budget
// smaller than max_running still bounds (0 is "no bound" to the matcher).
size_t grammar_state_share(const EngineConfig& cfg) {
  if (cfg.grammar_state_bytes <= 0) return 0;
  return static_cast<size_t>(
      std::max<int64_t>(1, cfg.grammar_state_bytes / std::max<int64_t>(1, cfg.max_running)));
}

// The trunk's hidden rows kept with each block (cache/block_hidden.h): only for a drafter that
// reads them, and only with a prefix cache that could serve them back.
BlockHidden block_hidden(const Model& m, const EngineConfig& c, const Drafter* d) {
  BlockHidden h;
  h.kv_floats = m.kv_block_floats(c.block_size);
  h.block_size = c.block_size;
  h.n_embd = c.prefix_cache && d && d->wants_hidden() ? m.hparams().n_embd : 0;
  return h;
}

CacheConfig cache_config(const Model& m, const EngineConfig& c, const BlockHidden& h,
                         const TierSecret& secret) {
  CacheConfig cc;
  cc.chain_secret = secret.chain;
  cc.block_size = c.block_size;
  cc.block_floats = m.kv_block_floats(c.block_size);
  cc.hidden_floats = h.floats();
  cc.state_floats = m.state_floats();
  cc.checkpoint_every = c.checkpoint_every;
  cc.cache_bytes = c.cache_bytes;
  return cc;
}

SchedulerConfig scheduler_config(const Model& m, const EngineConfig& c) {
  SchedulerConfig sc;
  sc.block_size = c.block_size;
  sc.checkpoint_every = c.checkpoint_every;
  sc.prefix_cache = c.prefix_cache;
  sc.max_batch_tokens = c.max_batch_tokens;
  sc.max_running = c.max_running;
  sc.fair_ratio = c.fair_ratio;
  sc.seat_quantum = c.seat_quantum;
  sc.client_max_running = c.client_max_running;
  sc.state_floats = m.state_floats();
  return sc;
}

std::unique_ptr<LowerTiers> tiers_open(const Model& m, const EngineConfig& c, const BlockHidden& h,
                                       const TierSecret& secret) {
  if (!c.prefix_cache || !c.tiers.enabled()) return nullptr;
  TierShape shape;
  shape.fingerprint = c.fingerprint;
  shape.block_size = c.block_size;
  shape.block_floats = m.kv_block_floats(c.block_size);
  shape.state_floats = m.state_floats();
  shape.hidden_floats = h.on() ? h.row_floats() : 0;
  return std::make_unique<LowerTiers>(c.tiers, shape, secret);
}

EngineConfig config_checked(EngineConfig c) {
  if (c.block_size < 1) throw Error("--block-size must be ≥ 1");
  if (c.checkpoint_every < 1) throw Error("--checkpoint-every must be ≥ 1");
  if (c.max_batch_tokens < 1) throw Error("--max-batch-tokens must be ≥ 1");
  if (c.max_running < 1) throw Error("max_running must be ≥ 1");
  if (c.max_queue < 0) throw Error("max_queue must be ≥ 0");
  if (c.fair_ratio < 0) throw Error("--fair-ratio must be ≥ 0");
  if (c.seat_quantum < 0) throw Error("--seat-quantum must be ≥ 0");
  if (c.client_max_running < 0) throw Error("--client-max-running must be ≥ 0");
  if (c.start_after_requests < 0) throw Error("--start-after-requests must be ≥ 0");
  if (c.cache_bytes < 0) throw Error("--cache-bytes must be ≥ 0");
  if (c.threads < 0) throw Error("--threads must be ≥ 0");
  if (c.threads == 0)
    c.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return c;
}

}  // namespace

struct Engine::Impl {
  // One request the engine holds: its scheduling state and its text so far.
  struct Live {
    std::unique_ptr<Sequence> seq;
    std::unique_ptr<TextAssembler> text;  // null without a tokenizer
  };

  const Tokenizer* tokenizer;
  const EngineConfig cfg;
  const BlockHidden hidden;  // the drafter's hidden rows kept with each block (off: none)
  RequestLimits limits;
  const TierSecret secret;  // keys the chains of the cache and seals the tiers' records
  PrefixCache cache;
  std::unique_ptr<LowerTiers> tiers;  // null without lower tiers
  std::unique_ptr<TierBridge> bridge;
  Scheduler sched;
  RequestQueue queue;
  ModelRunner runner;
  std::vector<ChunkRun> runs;  // the step's chunks as the runner reads them (capacity kept)
  Postprocessor post;
  SpecDecoder spec;

  // Engine thread only.
  std::unordered_map<RequestId, Live> live;
  Intake intake;
  StepPlan plan;
  std::vector<ScheduledSeq*> refused;
  std::vector<ScheduledSeq*> group;               // admit()'s scratch
  std::vector<std::vector<RequestEvent>> events;  // per chunk of the step, until it is committed
  std::vector<FinishReason> finishes;
  std::vector<std::string> errors;  // per chunk: why its request fails (a non-finite logit, a
                                    // grammar that allows nothing), else empty
  std::vector<ErrorKind> error_kinds;
  MaskPrefetch masks;                      // after `live`: idle before the sequences go
  std::vector<SeqConstraint*> prefetched;  // the step's constrained sequences
  uint64_t requests_total = 0, prompt_tokens_total = 0, computed_tokens = 0;
  double busy_s = 0;
  std::thread thread;
  // Structured output's view of the vocabulary: built by the first constrained submit.
  std::once_flag grammar_vocab_once;
  std::shared_ptr<const grammar::Vocabulary> grammar_vocab;

  const std::shared_ptr<const grammar::Vocabulary>& grammar_vocabulary_get() {
    std::call_once(grammar_vocab_once, [this] {
      grammar_vocab = grammar_vocabulary(*tokenizer, end_of_sequence_ids(*tokenizer));
    });
    return grammar_vocab;
  }

  Impl(const Model& m, const Tokenizer* t, EngineConfig c, std::unique_ptr<Drafter> drafter)
      : tokenizer(t),
        cfg(config_checked(c)),
        hidden(block_hidden(m, cfg, drafter.get())),
        secret(cfg.prefix_cache && cfg.tiers.enabled() ? tier_secret_resolve(cfg.tiers)
                                                       : tier_secret_random()),
        cache(cache_config(m, cfg, hidden, secret)),
        tiers(tiers_open(m, cfg, hidden, secret)),
        bridge(tiers ? std::make_unique<TierBridge>(cache, *tiers) : nullptr),
        sched(scheduler_config(m, cfg), cache),
        queue(cfg.max_queue),
        runner(m, cfg.max_batch_tokens, cfg.max_running, cfg.threads, cfg.block_size),
        post(t, m.hparams().n_vocab, context_limit(m.hparams(), cfg.n_ctx)),
        spec(std::move(drafter), cfg.draft, m.hparams().n_vocab,
             context_limit(m.hparams(), cfg.n_ctx), hidden) {
    runner.hidden_want(spec.on() && spec.drafter()->wants_hidden());
    limits.n_vocab = m.hparams().n_vocab;
    limits.n_ctx = context_limit(m.hparams(), cfg.n_ctx);
    limits.block_size = cfg.block_size;
    limits.block_capacity = cache.stats().blocks_capacity;
    limits.cache_bytes = cfg.cache_bytes;
    limits.has_tokenizer = t != nullptr;
    limits.n_embd = m.hparams().n_embd;
    limits.imrope = m.hparams().rope_imrope;
    sched.tiers_attach(bridge.get());
    thread = std::thread([this] { loop(); });
  }

  void loop() {
    for (;;) {
      queue.take(intake, sched.has_work() && !held());
      for (auto& g : intake.fresh) admit(g);
      if (intake.stop) break;
      for (RequestId id : intake.cancels)
        if (auto it = live.find(id); it != live.end())
          finish(it->second.seq.get(), FinishReason::cancelled);
      if (intake.cancel_all) cancel_live();
      if (sched.has_work() && !held()) step_guarded();
      publish();
    }
    cancel_live();
    publish();
  }

  // What the runner reads of chunk c: its tokens (and drafts), its sequence's state and block
  // table, its checkpoints, images, and which logits rows its sampling reads.
  ChunkRun chunk_run_of(const ChunkPlan& c) const {
    const ScheduledSeq& q = *c.seq;
    const Sequence& s = sequence_of(c.seq);
    ChunkRun r;
    r.tokens = q.tokens.data() + c.pos0;
    r.pos0 = c.pos0;
    r.n_tokens = c.n_tokens;
    if (c.n_draft > 0) {
      INVAR_CHECK(c.n_draft <= static_cast<int64_t>(q.drafts.size()) &&
                  c.pos0 + 1 == static_cast<int64_t>(q.tokens.size()));
      r.drafts = q.drafts.data();
      r.n_draft = c.n_draft;
    }
    r.state = sched.state(q);
    r.kv_blocks = q.block_ptrs.data();
    r.checkpoint_pos = c.checkpoint_pos;
    r.checkpoint_dst = c.checkpoint_dst;
    r.images = s.req.images.get();
    r.all_rows = c.n_draft > 0 || s.wants_all_logits();
    return r;
  }

  // EngineConfig::start_after_requests: steps wait (the loop sleeps in take()) until it is met.
  bool held() const { return requests_total < static_cast<uint64_t>(cfg.start_after_requests); }

  // (draft →) schedule → run → postprocess → commit → report.
  void step() {
    const auto t0 = std::chrono::steady_clock::now();
    refused.clear();
    spec.propose(sched.running(), runner.pool());
    sched.schedule(plan, refused);
    for (ScheduledSeq* q : refused)
      fail(&sequence_of(q), ErrorKind::context_overflow,
           "request needs more KV cache than --cache-bytes (" + std::to_string(cfg.cache_bytes) +
               " bytes) can hold");
    if (plan.n_chunks == 0) return;
    {
      // The forward pass never reads a grammar; the masks its rows need are computed meanwhile.
      // The join also runs when the pass throws: the handler then frees these sequences.
      masks_prefetch();
      struct Join {
        MaskPrefetch& m;
        ~Join() { m.wait(); }
      } join{masks};
      runs.resize(static_cast<size_t>(plan.n_chunks));
      for (size_t k = 0; k < runs.size(); ++k) runs[k] = chunk_run_of(plan.chunks[k]);
      runner.run(runs);
    }
    // The step's rows are sampled on the pool's threads first (postprocess.h).
    post.samples_prefetch(
        plan, [&](int64_t k) { return runner.logits(k); }, runner.pool());
    // What each chunk produced decides what is committed: positions holding rejected drafts,
    // or computed after the request ended, never reach the cache.
    const auto n = static_cast<size_t>(plan.n_chunks);
    if (events.size() < n) events.resize(n);
    finishes.resize(n);
    errors.resize(n);
    error_kinds.resize(n);
    for (size_t k = 0; k < n; ++k) {
      ChunkPlan& c = plan.chunks[k];
      Sequence& s = sequence_of(c.seq);
      events[k].clear();
      errors[k].clear();
      ChunkOutcome o;
      try {
        o = post.process(c, runner.logits(static_cast<int64_t>(k)), live.at(s.id).text.get(),
                         events[k]);
      } catch (const std::exception& e) {
        // A non-finite logit, a grammar with no way on or past a run-time limit, or any other
        // failure of this chunk's sampling (ErrorKind::internal): the verified positions are
        // kept (what they hold is a function of the tokens), nothing of this chunk is
        // reported, and the request ends with the error once the step is committed. The other
        // requests of the step go on: a request can fail only itself.
        const auto* ee = dynamic_cast<const EngineError*>(&e);
        events[k].clear();
        errors[k] = *e.what() ? e.what() : "sampling failed";
        error_kinds[k] = ee ? ee->kind() : ErrorKind::internal;
        o = ChunkOutcome{FinishReason::error, c.n_tokens - c.n_draft, 0};
      }
      c.n_kept = o.n_kept;
      finishes[k] = o.finish;
      if (o.n_kept < c.n_tokens)
        runner.state_rollback(static_cast<int64_t>(k), o.n_kept, sched.state(s));
      spec.chunk_done(s, c, o, runner.hidden(static_cast<int64_t>(k)));
      computed_tokens += static_cast<uint64_t>(o.n_kept);
    }
    sched.commit(plan);
    // Metrics first: a client that reads them after this step's token sees the step's state.
    publish();
    // Sequences may finish (and be freed) while the plan is walked: each chunk is its own.
    for (size_t k = 0; k < n; ++k) {
      Sequence* s = &sequence_of(plan.chunks[k].seq);
      for (RequestEvent& ev : events[k])
        if (s->sink) s->sink(std::move(ev));
      if (!errors[k].empty())
        fail(s, error_kinds[k], std::move(errors[k]));
      else if (finishes[k] != FinishReason::none)
        finish(s, finishes[k]);
    }
    busy_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  void masks_prefetch() {
    prefetched.clear();
    if (!cfg.mask_overlap) return;
    for (int64_t k = 0; k < plan.n_chunks; ++k) {
      Sequence& s = sequence_of(plan.chunks[static_cast<size_t>(k)].seq);
      if (s.constraint) prefetched.push_back(s.constraint.get());
    }
    masks.start(prefetched);
  }

  // A failing forward pass leaves the planned sequences' states undefined: they end with the
  // error, the others continue.
  void step_guarded() {
    try {
      step();
    } catch (const std::exception& e) {
      std::vector<Sequence*> hit;
      for (int64_t k = 0; k < plan.n_chunks; ++k)
        hit.push_back(&sequence_of(plan.chunks[static_cast<size_t>(k)].seq));
      plan.n_chunks = 0;
      for (Sequence* s : hit)
        if (live.count(s->id)) fail(s, ErrorKind::internal, e.what());
    }
  }

  void admit(SequenceGroup& g) {
    group.clear();
    for (auto& s : g) {
      Sequence* p = s.get();
      ++requests_total;
      prompt_tokens_total += static_cast<uint64_t>(p->n_prompt);
      Live& l = live[p->id];
      if (tokenizer) l.text = std::make_unique<TextAssembler>(p->req.stop_strings);
      spec.seq_begin(*p);
      l.seq = std::move(s);
      group.push_back(p);
    }
    sched.enqueue_group(group);
  }

  void fail(Sequence* s, ErrorKind kind, std::string error) {
    RequestEvent ev;
    ev.error = std::move(error);
    ev.error_kind = kind;
    finish(s, FinishReason::error, std::move(ev));
  }

  void finish(Sequence* s, FinishReason reason, RequestEvent&& ev = {}) {
    ev.kind = EventKind::finished;
    ev.finish = reason;
    ev.logits = std::move(s->logits_pending);
    ev.usage.prompt_tokens = s->n_prompt;
    ev.usage.cached_tokens = std::max<int64_t>(s->cached_tokens, 0);
    ev.usage.completion_tokens = s->n_generated;
    ev.usage.draft_tokens = s->n_drafted;
    ev.usage.accepted_draft_tokens = s->n_accepted;
    ev.usage.speculative = spec.on();
    auto it = live.find(s->id);
    if (TextAssembler* t = it->second.text.get(); t && !t->stopped()) ev.text = t->finish();
    sched.remove(s);
    // Metrics are published before the caller hears of the end, so a caller that reads them
    // after its last event sees this request's blocks released.
    EventSink sink = std::move(s->sink);
    live.erase(it);  // frees s
    publish();
    if (sink) sink(std::move(ev));
  }

  void cancel_live() {
    std::vector<Sequence*> all;
    for (auto& [id, l] : live) all.push_back(l.seq.get());
    std::sort(all.begin(), all.end(), [](auto* a, auto* b) { return a->id < b->id; });
    for (Sequence* s : all) finish(s, FinishReason::cancelled);
  }

  void publish() {
    const CacheStats cs = cache.stats();
    EngineMetrics m;
    m.requests_total = requests_total;
    m.requests_running = sched.running().size();
    m.requests_waiting = static_cast<uint64_t>(sched.waiting_count());
    m.groups_waiting = static_cast<uint64_t>(sched.units_waiting());
    m.prompt_tokens_total = prompt_tokens_total;
    m.cached_tokens_total = static_cast<uint64_t>(sched.counters().cached_tokens);
    m.generated_tokens_total = post.generated_total();
    m.cache_lookups = static_cast<uint64_t>(cs.lookups);
    m.cache_hits = static_cast<uint64_t>(cs.hits);
    m.resident_blocks = static_cast<uint64_t>(cs.blocks_resident);
    m.resident_checkpoints = static_cast<uint64_t>(cs.checkpoints_resident);
    m.resident_bytes = static_cast<uint64_t>(cs.bytes_resident);
    m.referenced_blocks = static_cast<uint64_t>(cs.blocks_referenced);
    m.cache_table_bytes = static_cast<uint64_t>(cs.bytes_tables);
    m.evictions = static_cast<uint64_t>(cs.evicted_blocks + cs.evicted_checkpoints);
    m.preemptions = static_cast<uint64_t>(sched.counters().preemptions);
    m.seat_rotations = static_cast<uint64_t>(sched.counters().seat_rotations);
    spec.metrics_fill(m);
    m.grammar_masks_prefetched = masks.computed();
    m.tokens_per_s = busy_s > 0 ? static_cast<double>(computed_tokens) / busy_s : 0.0;
    queue.publish(m, static_cast<int64_t>(live.size()));
  }
};

Engine::Engine(const Model& model, const Tokenizer* tokenizer, EngineConfig cfg)
    : Engine(model, tokenizer, cfg, drafter_make(cfg.spec, model, cfg.draft)) {}

Engine::Engine(const Model& model, const Tokenizer* tokenizer, EngineConfig cfg,
               std::unique_ptr<Drafter> drafter)
    : impl_(std::make_unique<Impl>(model, tokenizer, cfg, std::move(drafter))) {}

Engine::~Engine() {
  impl_->queue.stop();
  impl_->thread.join();
}

RequestId Engine::submit(GenerationRequest req, EventSink sink) {
  std::vector<GenerationRequest> reqs;
  reqs.push_back(std::move(req));
  std::vector<EventSink> sinks;
  sinks.push_back(std::move(sink));
  return submit_group(std::move(reqs), std::move(sinks)).front();
}

std::vector<RequestId> Engine::submit_group(std::vector<GenerationRequest> reqs,
                                            std::vector<EventSink> sinks) {
  INVAR_CHECK(!reqs.empty() && reqs.size() == sinks.size());
  for (const GenerationRequest& r : reqs) request_check(r, impl_->limits);
  // FNV-1a: a collision only makes two clients share one part of the engine.
  uint64_t client = 0xcbf29ce484222325ull;
  for (unsigned char c : reqs.front().client_key) client = (client ^ c) * 0x100000001b3ull;
  SequenceGroup g;
  for (size_t i = 0; i < reqs.size(); ++i) {
    GenerationRequest& req = reqs[i];
    auto s = std::make_unique<Sequence>();
    s->cache_salt = req.cache_salt;
    s->cache_lookup = !req.prompt_logprobs;
    s->client = client;
    s->priority = reqs.front().priority;
    s->tokens = req.prompt;
    s->tokens.reserve(req.prompt.size() + static_cast<size_t>(req.max_tokens) + 1);
    s->n_prompt = static_cast<int64_t>(req.prompt.size());
    if (req.images && !req.images->images.empty()) {
      s->key_tokens = req.images->cache_key_tokens(req.prompt);
      s->key_tokens.reserve(s->tokens.capacity());
    }
    if (req.grammar)
      s->constraint =
          std::make_unique<SeqConstraint>(req.grammar, impl_->grammar_vocabulary_get(),
                                          req.grammar_after, grammar_state_share(impl_->cfg));
    s->req = std::move(req);
    s->sink = std::move(sinks[i]);
    g.push_back(std::move(s));
  }
  return impl_->queue.submit(std::move(g));
}

void Engine::cancel(RequestId id) {
  impl_->queue.cancel(id);
}

EngineMetrics Engine::metrics() const {
  EngineMetrics m = impl_->queue.metrics();
  if (impl_->tiers) m.tiers = impl_->tiers->report();
  return m;
}

std::string Engine::tiers_describe() const {
  return impl_->tiers ? impl_->tiers->describe() : std::string();
}

const EngineConfig& Engine::config() const {
  return impl_->cfg;
}

const CacheBudget& Engine::cache_budget() const {
  return impl_->cache.budget();
}

const PrefixCache& Engine::prefix_cache() const {
  return impl_->cache;
}

int64_t Engine::n_ctx() const {
  return impl_->limits.n_ctx;
}

const RequestLimits& Engine::limits() const {
  return impl_->limits;
}

void Engine::drain(double timeout_s) {
  impl_->queue.drain(timeout_s);
}

}  // namespace invar
