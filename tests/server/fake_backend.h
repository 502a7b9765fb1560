// A scripted Backend for the server's tests: a byte-level vocabulary (ids 0..255 are the bytes,
// 256 is end-of-sequence) and an "engine" thread that emits one token per request per step.
// Tokens follow `script` when set (cycled), else a hash of (prompt, position); logprobs and the
// candidates are functions of the token, so every run of a request gives the same values. Like
// the engine, it owns stop detection: stop tokens, stop strings and the released text.
#pragma once

#include <time.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "engine/text_assembler.h"
#include "server/backend.h"

namespace invar::server::testing {

inline double thread_cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

class FakeBackend : public Backend {
 public:
  static constexpr int32_t kEos = 256;

  FakeBackend() : worker_([this] { run(); }) {}
  ~FakeBackend() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  // Knobs (set before requests arrive).
  std::vector<int32_t> script;  // generated ids, cycled; empty: hash of prompt
  std::chrono::microseconds token_delay{200};
  int64_t ctx = 256;
  std::atomic<bool> hold{false};  // while true, no request makes progress
  // Tokenising a text of at least big_text bytes sleeps this long and burns this much CPU.
  size_t big_text = 10000;
  std::chrono::milliseconds big_encode_sleep{0};
  double big_encode_cpu_s = 0;
  std::shared_future<void> big_encode_gate;  // when valid, such a tokenisation waits for it too
  // While true, a finished request's sink is kept (as the engine thread may hold one for a
  // while after the request's last event) until release_kept_sinks().
  std::atomic<bool> keep_sinks{false};

  // Observations.
  std::atomic<int64_t> cancels{0}, submits{0};
  mutable std::atomic<int64_t> encodes{0};  // prompts tokenised (chat ones too)
  std::vector<GenerationRequest> submitted() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }
  int64_t active() {
    std::lock_guard<std::mutex> lock(mu_);
    return int64_t(reqs_.size());
  }
  int64_t release_kept_sinks() {
    std::vector<EventSink> gone;
    {
      std::lock_guard<std::mutex> lock(mu_);
      gone.swap(kept_);
    }
    return int64_t(gone.size());  // destroyed here, on the caller's thread
  }

  std::string model_id() const override { return "fake-model"; }
  std::string system_fingerprint() const override { return "fp_fake"; }
  int64_t n_ctx() const override { return ctx; }
  int64_t max_running() const override { return 64; }
  int64_t n_vocab() const override { return 257; }
  std::vector<int32_t> encode(std::string_view text) const override {
    ++encodes;
    if (text.size() >= big_text) {
      if (big_encode_gate.valid()) big_encode_gate.wait();
      std::this_thread::sleep_for(big_encode_sleep);
      // Spin on this thread's CPU clock, not the wall clock: on a loaded machine a wall-clock
      // spin gets a fraction of a core and may stay under the server's CPU budget.
      const double t0 = thread_cpu_now();
      volatile uint64_t x = 0;
      while (thread_cpu_now() - t0 < big_encode_cpu_s) x = x + 1;
    }
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  std::vector<int32_t> encode_plain(std::string_view text) const override { return encode(text); }
  const ChatPrompt* chat_template() const override { return &chat_; }
  ChatTokens chat_encode(const ChatInput& in) const override {
    ChatRendered r = chat_.render(in, nullptr);
    return {encode(r.text), r.in_reasoning};
  }
  std::string token_bytes(int32_t id) const override {
    return id < 256 ? std::string(1, char(id)) : std::string();
  }
  std::vector<int32_t> end_of_sequence_ids() const override { return {kEos}; }
  size_t max_token_bytes() const override { return 1; }

  RequestId submit(GenerationRequest req, EventSink sink) override {
    if (int64_t(req.prompt.size()) + req.max_tokens > ctx) throw Error("over the context");
    std::lock_guard<std::mutex> lock(mu_);
    RequestId id = ++next_;
    log_.push_back(req);
    TextAssembler text(req.stop_strings);
    reqs_.emplace(id, Req{std::move(req), std::move(sink), 0, false, std::move(text)});
    submits++;
    cv_.notify_all();
    return id;
  }
  void cancel(RequestId id) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = reqs_.find(id);
    if (it != reqs_.end()) it->second.cancelled = true;
    cancels++;
  }
  EngineMetrics metrics() const override {
    std::lock_guard<std::mutex> lock(mu_);
    EngineMetrics m;
    m.requests_running = reqs_.size();
    m.referenced_blocks = reqs_.size();  // one block per live request
    m.requests_total = next_;
    return m;
  }
  void drain(double) override {
    for (int i = 0; i < 2000; ++i) {
      if (active() == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  static int32_t token_at(const std::vector<int32_t>& prompt, int64_t pos) {
    uint64_t h = 1469598103934665603ull;
    for (int32_t t : prompt) h = (h ^ uint32_t(t)) * 1099511628211ull;
    h = (h ^ uint64_t(pos)) * 1099511628211ull;
    return int32_t('a' + (h >> 33) % 26);
  }
  static float logprob_of(int32_t id) { return -float(id % 13) / 7.0f; }

 private:
  struct Req {
    GenerationRequest g;
    EventSink sink;
    int64_t generated = 0;
    bool cancelled = false;
    TextAssembler text;
  };

  void finish(Req& r, FinishReason f) {
    RequestEvent ev;
    ev.kind = EventKind::finished;
    ev.finish = f;
    ev.usage.prompt_tokens = int64_t(r.g.prompt.size());
    ev.usage.completion_tokens = r.generated;
    ev.usage.cached_tokens = r.g.cache_salt == "cached" ? 3 : 0;
    if (!r.text.stopped()) ev.text = r.text.finish();
    r.sink(std::move(ev));
  }

  // One step: one token for each live request.
  void step(Req& r, bool* done) {
    if (r.cancelled) return finish(r, FinishReason::cancelled), void(*done = true);
    if (r.generated == 0 && r.g.prompt_logprobs >= 0) {
      for (size_t i = 1; i < r.g.prompt.size(); ++i) {
        RequestEvent ev;
        ev.kind = EventKind::prompt_logprobs;
        ev.token = r.g.prompt[i];
        ev.logprob = logprob_of(ev.token);
        ev.position = int64_t(i);
        r.sink(std::move(ev));
      }
    }
    int64_t pos = int64_t(r.g.prompt.size()) + r.generated;
    RequestEvent ev;
    ev.kind = EventKind::token;
    ev.token = script.empty() ? token_at(r.g.prompt, pos) : script[r.generated % script.size()];
    ev.logprob = logprob_of(ev.token);
    for (int64_t k = 0; k < r.g.top_logprobs; ++k)
      ev.top.push_back({int32_t('a' + k), logprob_of(int32_t('a' + k))});
    ev.position = pos;
    r.generated++;
    ev.stop_token = std::find(r.g.stop_tokens.begin(), r.g.stop_tokens.end(), ev.token) !=
                    r.g.stop_tokens.end();
    if (!ev.stop_token) ev.text = r.text.push(token_bytes(ev.token));
    const bool stop = ev.stop_token || r.text.stopped();
    r.sink(std::move(ev));
    if (stop) return finish(r, FinishReason::stop), void(*done = true);
    if (r.generated >= r.g.max_tokens) return finish(r, FinishReason::length), void(*done = true);
  }

  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!quit_) {
      if (reqs_.empty() || hold) {
        cv_.wait_for(lock, std::chrono::milliseconds(2));
        continue;
      }
      for (auto it = reqs_.begin(); it != reqs_.end();) {
        bool done = false;
        step(it->second, &done);
        if (done && keep_sinks) kept_.push_back(std::move(it->second.sink));
        it = done ? reqs_.erase(it) : std::next(it);
      }
      lock.unlock();
      std::this_thread::sleep_for(token_delay);
      lock.lock();
    }
  }

  // "<role>content\n" per message, then "<assistant>".
  ChatPrompt chat_{
      {"{% for m in messages %}{{ '<' + m.role + '>' + m.content + '\\n' }}"
       "{% endfor %}{{ '<assistant>' }}",
       "the fake backend", "", "", std::nullopt, true, std::nullopt}};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<RequestId, Req> reqs_;
  std::vector<GenerationRequest> log_;
  std::vector<EventSink> kept_;
  RequestId next_ = 0;
  bool quit_ = false;
  std::thread worker_;
};

}  // namespace invar::server::testing
