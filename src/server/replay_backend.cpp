// The replay backend (`invar serve --replay-outputs FILE`, for tests): the model's vocabulary
// and chat template, no weights and no engine. Each request is answered with a fixture output,
// tokenised by the model's vocabulary and emitted one token per step with the engine's event
// contract (stop tokens, stop strings, max_tokens, released text). It exists because
// random-weight test models never write reasoning or tool-call markers, and the real server
// path (template, parser, SSE, clients) must still be exercised end to end.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/error.h"
#include "core/file_read.h"
#include "engine/text_assembler.h"
#include "server/vocab_backend.h"

namespace invar::server {
namespace {

constexpr int64_t kReplayContext = 65536;

class ReplayBackend : public VocabBackend {
 public:
  ReplayBackend(const std::string& model_path, const std::string& outputs_path, BackendOptions opts)
      : opts_(std::move(opts)) {
    vocab_set(Tokenizer::from_file(model_path), opts_);
    const auto j = nlohmann::ordered_json::parse(file_read(outputs_path));
    if (!j.is_object() || j.empty())
      throw Error(outputs_path + ": expected a JSON object {\"text in the prompt\": \"output\"}");
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!it.value().is_string()) throw Error(outputs_path + ": outputs must be strings");
      outputs_.emplace_back(it.key(), it.value().get<std::string>());
    }
    std::fprintf(stderr, "invar serve: replaying %zu fixture outputs from %s (no model weights)\n",
                 outputs_.size(), outputs_path.c_str());
    worker_ = std::thread([this] { run(); });
  }
  ~ReplayBackend() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  std::string model_id() const override { return "replay"; }
  std::string system_fingerprint() const override { return "fp_replay"; }
  int64_t n_ctx() const override { return kReplayContext; }
  int64_t max_running() const override { return EngineConfig{}.max_running; }

  RequestId submit(GenerationRequest req, EventSink sink) override {
    // The output whose key the prompt contains (the first such in the file).
    const std::string prompt = tok_->decode(req.prompt);
    const std::string* output = nullptr;
    for (const auto& [key, text] : outputs_)
      if (prompt.find(key) != std::string::npos) {
        output = &text;
        break;
      }
    if (!output) throw Error("replay: no fixture output's key occurs in the prompt");
    std::lock_guard<std::mutex> lock(mu_);
    RequestId id = ++next_;
    Req r{std::move(req), std::move(sink),  tok_->encode(*output, true), 0,
          false,          TextAssembler({})};
    r.text = TextAssembler(r.g.stop_strings);
    reqs_.emplace(id, std::move(r));
    running_ = reqs_.size();
    cv_.notify_all();
    return id;
  }
  void cancel(RequestId id) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = reqs_.find(id); it != reqs_.end()) it->second.cancelled = true;
  }
  EngineMetrics metrics() const override {
    EngineMetrics m;
    m.requests_running = running_.load();
    return m;
  }
  void drain(double timeout_s) override {
    for (double waited = 0; waited < timeout_s && running_.load() > 0; waited += 0.001)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

 private:
  struct Req {
    GenerationRequest g;
    EventSink sink;
    std::vector<int32_t> tokens;  // the output to replay
    size_t next = 0;
    bool cancelled = false;
    TextAssembler text;
  };

  static void finish(Req& r, FinishReason f) {
    RequestEvent ev;
    ev.kind = EventKind::finished;
    ev.finish = f;
    ev.usage.prompt_tokens = int64_t(r.g.prompt.size());
    ev.usage.completion_tokens = int64_t(r.next);
    if (!r.text.stopped()) ev.text = r.text.finish();
    r.sink(std::move(ev));
  }

  // One token of r; true when r is done.
  bool step(Req& r) {
    if (r.cancelled) return finish(r, FinishReason::cancelled), true;
    if (r.next >= r.tokens.size()) {  // the output ends as a model's would: end-of-sequence
      if (!eos_.empty() && std::find(r.g.stop_tokens.begin(), r.g.stop_tokens.end(), eos_[0]) !=
                               r.g.stop_tokens.end()) {
        RequestEvent ev;
        ev.token = eos_[0];
        ev.stop_token = true;
        r.sink(std::move(ev));
      }
      return finish(r, FinishReason::stop), true;
    }
    RequestEvent ev;
    ev.token = r.tokens[r.next];
    ev.position = int64_t(r.g.prompt.size() + r.next);
    if (r.g.top_logprobs > 0) ev.top.push_back({ev.token, 0.0f});
    ++r.next;
    ev.stop_token = std::find(r.g.stop_tokens.begin(), r.g.stop_tokens.end(), ev.token) !=
                    r.g.stop_tokens.end();
    if (!ev.stop_token) ev.text = r.text.push(tok_->token_bytes(ev.token));
    const bool stop = ev.stop_token || r.text.stopped();
    r.sink(std::move(ev));
    if (stop) return finish(r, FinishReason::stop), true;
    if (int64_t(r.next) >= r.g.max_tokens) return finish(r, FinishReason::length), true;
    return false;
  }

  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!quit_) {
      if (reqs_.empty()) {
        cv_.wait_for(lock, std::chrono::milliseconds(5));
        continue;
      }
      for (auto it = reqs_.begin(); it != reqs_.end();)
        it = step(it->second) ? reqs_.erase(it) : std::next(it);
      running_ = reqs_.size();
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(300));
      lock.lock();
    }
  }

  BackendOptions opts_;
  std::vector<std::pair<std::string, std::string>> outputs_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<RequestId, Req> reqs_;
  std::atomic<size_t> running_{0};
  RequestId next_ = 0;
  bool quit_ = false;
  std::thread worker_;
};

}  // namespace

std::unique_ptr<Backend> replay_backend_load(const std::string& model_path,
                                             const std::string& outputs_path, BackendOptions opts) {
  return std::make_unique<ReplayBackend>(model_path, outputs_path, std::move(opts));
}

}  // namespace invar::server
