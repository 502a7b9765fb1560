#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "cache/prefix_cache.h"
#include "core/error.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "tokenizer/tokenizer.h"

namespace invar {

namespace {

CacheConfig cache_config(const Model& m, const EngineConfig& c) {
  CacheConfig cc;
  cc.block_size = c.block_size;
  cc.block_floats = m.kv_block_floats(c.block_size);
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
  sc.state_floats = m.state_floats();
  return sc;
}

EngineConfig config_checked(EngineConfig c) {
  if (c.block_size < 1) throw Error("--block-size must be ≥ 1");
  if (c.checkpoint_every < 1) throw Error("--checkpoint-every must be ≥ 1");
  if (c.max_batch_tokens < 1) throw Error("--max-batch-tokens must be ≥ 1");
  if (c.max_running < 1) throw Error("max_running must be ≥ 1");
  if (c.max_queue < 0) throw Error("max_queue must be ≥ 0");
  if (c.cache_bytes < 0) throw Error("--cache-bytes must be ≥ 0");
  if (c.threads < 0) throw Error("--threads must be ≥ 0");
  if (c.threads == 0)
    c.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return c;
}

bool stop_string_found(const std::string& text, size_t new_from,
                       const std::vector<std::string>& stops) {
  for (const auto& s : stops) {
    // Only matches that end in the new text: earlier ones would have stopped already.
    const size_t from = new_from >= s.size() ? new_from - s.size() + 1 : 0;
    if (text.find(s, from) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

struct Engine::Impl {
  const Model& model;
  const Tokenizer* tokenizer;
  EngineConfig cfg;
  int64_t n_vocab;
  int64_t n_ctx;
  int64_t block_capacity;
  ThreadPool pool;
  PrefixCache cache;
  Scheduler sched;

  // Shared with callers, under mu.
  mutable std::mutex mu;
  std::condition_variable cv_work;  // engine thread waits for input
  std::condition_variable cv_idle;  // drain() waits for the engine to empty
  std::vector<std::unique_ptr<Sequence>> inbox;
  std::vector<RequestId> cancels;
  bool stop = false, draining = false, cancel_everything = false;
  RequestId next_id = 1;
  int64_t n_live = 0;  // submitted and not finished
  EngineMetrics snapshot;

  // Engine thread only.
  std::unordered_map<RequestId, std::unique_ptr<Sequence>> live;
  StepPlan plan;
  std::vector<ScheduledSeq*> refused;
  std::vector<SeqChunk> batch;
  std::vector<float> logits;
  std::vector<int64_t> logits_offset;
  SamplerScratch scratch;
  uint64_t requests_total = 0, prompt_tokens_total = 0, generated_total = 0;
  double busy_s = 0;
  uint64_t computed_tokens = 0;
  std::thread thread;

  Impl(const Model& m, const Tokenizer* t, EngineConfig c)
      : model(m),
        tokenizer(t),
        cfg(config_checked(c)),
        n_vocab(m.hparams().n_vocab),
        n_ctx(cfg.n_ctx > 0 ? cfg.n_ctx
                            : (m.hparams().n_ctx_train > 0 ? m.hparams().n_ctx_train : 1 << 20)),
        block_capacity(0),
        pool(cfg.threads),
        cache(cache_config(m, cfg)),
        sched(scheduler_config(m, cfg), cache) {
    block_capacity = cache.stats().blocks_capacity;
    thread = std::thread([this] { loop(); });
  }

  void emit(Sequence* s, RequestEvent&& ev) {
    if (s->sink) s->sink(std::move(ev));
  }

  void finish(Sequence* s, FinishReason reason, std::string error = {}) {
    RequestEvent ev;
    ev.kind = EventKind::finished;
    ev.finish = reason;
    ev.error = std::move(error);
    ev.logits = std::move(s->logits_pending);
    ev.prompt_tokens = s->n_prompt;
    ev.cached_tokens = std::max<int64_t>(s->cached_tokens, 0);
    ev.completion_tokens = s->n_generated;
    sched.remove(s);
    // Metrics are published before the caller hears of the end, so a caller that reads them
    // after its last event sees this request's blocks released.
    EventSink sink = std::move(s->sink);
    live.erase(s->id);  // frees s
    publish();
    if (sink) sink(std::move(ev));
  }

  void loop() {
    for (;;) {
      std::vector<std::unique_ptr<Sequence>> fresh;
      std::vector<RequestId> cancel_ids;
      bool cancel_all = false;
      {
        std::unique_lock lk(mu);
        cv_work.wait(lk, [&] {
          return stop || cancel_everything || !inbox.empty() || !cancels.empty() ||
                 sched.has_work();
        });
        if (stop) break;
        fresh.swap(inbox);
        cancel_ids.swap(cancels);
        cancel_all = cancel_everything;
        cancel_everything = false;
      }
      for (auto& s : fresh) {
        Sequence* p = s.get();
        ++requests_total;
        prompt_tokens_total += static_cast<uint64_t>(p->n_prompt);
        live.emplace(p->id, std::move(s));
        sched.enqueue(p);
      }
      for (RequestId id : cancel_ids)
        if (auto it = live.find(id); it != live.end())
          finish(it->second.get(), FinishReason::cancelled);
      if (cancel_all) cancel_live();
      if (sched.has_work()) step_guarded();
      publish();
    }
    cancel_live();
    publish();
  }

  void cancel_live() {
    std::vector<Sequence*> all;
    for (auto& [id, s] : live) all.push_back(s.get());
    std::sort(all.begin(), all.end(), [](auto* a, auto* b) { return a->id < b->id; });
    for (Sequence* s : all) finish(s, FinishReason::cancelled);
  }

  // A failing forward pass leaves the planned sequences' states undefined: they end with the
  // error, the others continue.
  void step_guarded() {
    try {
      step();
    } catch (const std::exception& e) {
      std::vector<Sequence*> hit;
      for (int64_t k = 0; k < plan.n_chunks; ++k)
        hit.push_back(static_cast<Sequence*>(plan.chunks[static_cast<size_t>(k)].seq));
      plan.n_chunks = 0;
      for (Sequence* s : hit)
        if (live.count(s->id)) finish(s, FinishReason::error, e.what());
    }
  }

  void step() {
    const auto t0 = std::chrono::steady_clock::now();
    refused.clear();
    sched.schedule(plan, refused);
    for (ScheduledSeq* s : refused)
      finish(static_cast<Sequence*>(s), FinishReason::error,
             "request needs more KV cache than --cache-bytes (" + std::to_string(cfg.cache_bytes) +
                 " bytes) can hold");
    if (plan.n_chunks == 0) return;
    // Logits rows: every position for requests that asked for them, else the last one.
    batch.resize(static_cast<size_t>(plan.n_chunks));
    logits_offset.resize(static_cast<size_t>(plan.n_chunks));
    int64_t rows = 0;
    for (int64_t k = 0; k < plan.n_chunks; ++k) {
      const ChunkPlan& c = plan.chunks[static_cast<size_t>(k)];
      logits_offset[static_cast<size_t>(k)] = rows * n_vocab;
      rows += static_cast<const Sequence*>(c.seq)->wants_all_logits() ? c.n_tokens : 1;
    }
    if (static_cast<int64_t>(logits.size()) < rows * n_vocab)
      logits.resize(static_cast<size_t>(rows * n_vocab));
    for (int64_t k = 0; k < plan.n_chunks; ++k) {
      const ChunkPlan& c = plan.chunks[static_cast<size_t>(k)];
      SeqChunk& sc = batch[static_cast<size_t>(k)];
      sc = SeqChunk{};
      sc.tokens = c.seq->tokens.data() + c.pos0;
      sc.n_tokens = c.n_tokens;
      sc.pos0 = c.pos0;
      sc.state = sched.state(*c.seq);
      sc.kv_blocks = c.seq->block_ptrs.data();
      sc.block_size = cfg.block_size;
      sc.checkpoint_pos = c.checkpoint_pos.data();
      sc.checkpoint_dst = c.checkpoint_dst.data();
      sc.n_checkpoints = static_cast<int64_t>(c.checkpoint_pos.size());
      sc.all_logits = static_cast<const Sequence*>(c.seq)->wants_all_logits();
      sc.logits = logits.data() + logits_offset[static_cast<size_t>(k)];
    }
    model.forward(std::span<const SeqChunk>(batch.data(), batch.size()), pool);
    sched.commit(plan);
    computed_tokens += static_cast<uint64_t>(plan.n_tokens);
    // Sequences may finish (and be freed) while the plan is walked: each chunk is its own.
    for (int64_t k = 0; k < plan.n_chunks; ++k)
      postprocess(plan.chunks[static_cast<size_t>(k)],
                  logits.data() + logits_offset[static_cast<size_t>(k)]);
    busy_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  void postprocess(const ChunkPlan& c, const float* rows) {
    auto* s = static_cast<Sequence*>(c.seq);
    const bool all = s->wants_all_logits();
    const auto V = static_cast<size_t>(n_vocab);
    if (s->req.capture_logits) {
      for (int64_t j = 0; j < c.n_tokens; ++j) {
        const int64_t p = c.pos0 + j;
        if (p < s->logits_reported) continue;  // recomputed after a preemption
        const float* r = rows + static_cast<size_t>(j) * V;
        s->logits_pending.emplace_back(p, std::vector<float>(r, r + V));
        s->logits_reported = p + 1;
      }
    }
    if (s->req.prompt_logprobs >= 0) {
      for (int64_t j = 0; j < c.n_tokens; ++j) {
        const int64_t target = c.pos0 + j + 1;  // row j predicts the token after it
        if (target >= s->n_prompt || target < s->prompt_lp_reported) continue;
        RequestEvent ev;
        ev.kind = EventKind::prompt_logprobs;
        ev.position = target;
        ev.token = s->tokens[static_cast<size_t>(target)];
        logprobs_top(rows + static_cast<size_t>(j) * V, n_vocab, ev.token, s->req.prompt_logprobs,
                     scratch, &ev.logprob, &ev.top);
        s->prompt_lp_reported = target + 1;
        emit(s, std::move(ev));
      }
    }
    if (s->remaining() > 0) return;  // prompt not finished yet
    if (s->n_generated >= s->req.max_tokens) return finish(s, FinishReason::length);
    const float* last = all ? rows + static_cast<size_t>(c.n_tokens - 1) * V : rows;
    const int64_t position = static_cast<int64_t>(s->tokens.size());
    RequestEvent ev;
    ev.kind = EventKind::token;
    ev.position = position;
    ev.token = sample_token(last, n_vocab, s->req.sampling, position, scratch);
    logprobs_top(last, n_vocab, ev.token, s->req.top_logprobs, scratch, &ev.logprob, &ev.top);
    ev.logits = std::move(s->logits_pending);
    s->logits_pending.clear();
    const int32_t token = ev.token;
    s->tokens.push_back(token);
    ++s->n_generated;
    ++generated_total;
    emit(s, std::move(ev));
    const auto& stops = s->req.stop_tokens;
    if (std::find(stops.begin(), stops.end(), token) != stops.end())
      return finish(s, FinishReason::stop);
    if (s->decoder) {
      const size_t before = s->text.size();
      s->text += s->decoder->push(token);
      if (stop_string_found(s->text, before, s->req.stop_strings))
        return finish(s, FinishReason::stop);
    }
    if (s->n_generated >= s->req.max_tokens || position + 1 >= n_ctx)
      return finish(s, FinishReason::length);
  }

  void publish() {
    const CacheStats cs = cache.stats();
    EngineMetrics m;
    m.requests_total = requests_total;
    m.requests_running = sched.running().size();
    m.requests_waiting = sched.waiting().size();
    m.prompt_tokens_total = prompt_tokens_total;
    m.cached_tokens_total = static_cast<uint64_t>(sched.counters().cached_tokens);
    m.generated_tokens_total = generated_total;
    m.cache_lookups = static_cast<uint64_t>(cs.lookups);
    m.cache_hits = static_cast<uint64_t>(cs.hits);
    m.resident_blocks = static_cast<uint64_t>(cs.blocks_resident);
    m.resident_checkpoints = static_cast<uint64_t>(cs.checkpoints_resident);
    m.resident_bytes = static_cast<uint64_t>(cs.bytes_resident);
    m.referenced_blocks = static_cast<uint64_t>(cs.blocks_referenced);
    m.evictions = static_cast<uint64_t>(cs.evicted_blocks + cs.evicted_checkpoints);
    m.preemptions = static_cast<uint64_t>(sched.counters().preemptions);
    m.tokens_per_s = busy_s > 0 ? static_cast<double>(computed_tokens) / busy_s : 0.0;
    std::lock_guard lk(mu);
    snapshot = m;
    n_live = static_cast<int64_t>(live.size()) + static_cast<int64_t>(inbox.size());
    if (n_live == 0) cv_idle.notify_all();
  }

  void validate(const GenerationRequest& r) const {
    if (r.prompt.empty()) throw Error("prompt is empty");
    for (size_t i = 0; i < r.prompt.size(); ++i)
      if (r.prompt[i] < 0 || r.prompt[i] >= n_vocab)
        throw Error("prompt token " + std::to_string(i) + " has id " + std::to_string(r.prompt[i]) +
                    ", outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
    if (r.max_tokens < 0) throw Error("max_tokens must be ≥ 0");
    const int64_t total = static_cast<int64_t>(r.prompt.size()) + r.max_tokens;
    if (total > n_ctx)
      throw Error("prompt (" + std::to_string(r.prompt.size()) + " tokens) + max_tokens (" +
                  std::to_string(r.max_tokens) + ") exceeds the context limit of " +
                  std::to_string(n_ctx) + " tokens");
    const auto& sp = r.sampling;
    if (!(sp.temperature >= 0.0f) || !std::isfinite(sp.temperature))
      throw Error("temperature must be a finite number ≥ 0");
    if (!(sp.top_p > 0.0f && sp.top_p <= 1.0f)) throw Error("top_p must be in (0, 1]");
    if (sp.top_k < 0) throw Error("top_k must be ≥ 0");
    if (r.top_logprobs < 0 || r.top_logprobs > 20) throw Error("top_logprobs must be in 0..20");
    if (r.prompt_logprobs > 20) throw Error("prompt_logprobs must be in 0..20");
    for (int32_t t : r.stop_tokens)
      if (t < 0 || t >= n_vocab)
        throw Error("stop token " + std::to_string(t) + " is not in the vocabulary");
    if (!r.stop_strings.empty() && tokenizer == nullptr)
      throw Error("stop strings need a tokenizer; this engine has none");
    for (const auto& s : r.stop_strings)
      if (s.empty()) throw Error("a stop string is empty");
    const int64_t blocks = (total + 1 + cfg.block_size - 1) / cfg.block_size;
    if (blocks > block_capacity)
      throw Error("request needs " + std::to_string(blocks) + " KV blocks; --cache-bytes (" +
                  std::to_string(cfg.cache_bytes) + ") holds " + std::to_string(block_capacity));
  }
};

Engine::Engine(const Model& model, const Tokenizer* tokenizer, EngineConfig cfg)
    : impl_(std::make_unique<Impl>(model, tokenizer, cfg)) {}

Engine::~Engine() {
  {
    std::lock_guard lk(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv_work.notify_all();
  impl_->thread.join();
}

RequestId Engine::submit(GenerationRequest req, EventSink sink) {
  impl_->validate(req);
  auto s = std::make_unique<Sequence>();
  s->cache_salt = req.cache_salt;
  s->cache_lookup = req.prompt_logprobs < 0;
  s->tokens = req.prompt;
  s->tokens.reserve(req.prompt.size() + static_cast<size_t>(req.max_tokens) + 1);
  s->n_prompt = static_cast<int64_t>(req.prompt.size());
  if (!req.stop_strings.empty()) s->decoder = std::make_unique<StreamDecoder>(*impl_->tokenizer);
  s->req = std::move(req);
  s->sink = std::move(sink);
  std::lock_guard lk(impl_->mu);
  if (impl_->stop || impl_->draining) throw Error("the engine is shutting down");
  const int64_t queued =
      static_cast<int64_t>(impl_->snapshot.requests_waiting + impl_->inbox.size());
  if (queued >= impl_->cfg.max_queue)
    throw Error("overloaded: the queue is full (" + std::to_string(queued) + " requests waiting)");
  s->id = impl_->next_id++;
  const RequestId id = s->id;
  impl_->inbox.push_back(std::move(s));
  ++impl_->n_live;
  impl_->cv_work.notify_all();
  return id;
}

void Engine::cancel(RequestId id) {
  std::lock_guard lk(impl_->mu);
  impl_->cancels.push_back(id);
  impl_->cv_work.notify_all();
}

EngineMetrics Engine::metrics() const {
  std::lock_guard lk(impl_->mu);
  return impl_->snapshot;
}

const EngineConfig& Engine::config() const {
  return impl_->cfg;
}

const CacheBudget& Engine::cache_budget() const {
  return impl_->cache.budget();
}

void Engine::drain(double timeout_s) {
  std::unique_lock lk(impl_->mu);
  impl_->draining = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  if (!impl_->cv_idle.wait_until(lk, deadline, [&] { return impl_->n_live == 0; })) {
    impl_->cancel_everything = true;
    impl_->cv_work.notify_all();
    impl_->cv_idle.wait(lk, [&] { return impl_->n_live == 0; });
  }
}

}  // namespace invar
