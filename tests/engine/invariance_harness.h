// Shared by the invariance tests: load a reference model once, run request sets through a fresh
// Engine, and compare request B's logits bit for bit at every position both runs computed.
#pragma once

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "cache/prefix_cache.h"
#include "core/sha256.h"
#include "engine/engine.h"
#include "model/model.h"

namespace invar::testing_engine {

// A --cache-bytes that holds exactly n_blocks KV blocks and n_checkpoints checkpoints of m,
// each with what the cache charges for its bookkeeping.
inline int64_t cache_bytes_for(const Model& m, int64_t block_size, int64_t n_blocks,
                               int64_t n_checkpoints) {
  CacheConfig cc;
  cc.block_size = block_size;
  cc.block_floats = m.kv_block_floats(block_size);
  cc.state_floats = m.state_floats();
  const CacheBudget cost = PrefixCache::budget_plan(cc);
  return n_blocks * cost.block_bytes() + n_checkpoints * cost.checkpoint_bytes();
}

inline const Model& model_get(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Model>> models;
  auto& m = models[name];
  if (!m) m = Model::load(std::string(INVAR_TEST_DATA_DIR) + "/models/" + name + ".gguf");
  return *m;
}

struct Outcome {
  std::map<int64_t, std::vector<float>> logits;  // position → [V]
  std::vector<int32_t> generated;
  std::vector<float> logprobs;                  // of each generated token
  std::vector<std::vector<TokenLogprob>> tops;  // its top_logprobs candidates
  int64_t drafted = 0, accepted = 0;            // speculative decoding
  int64_t cached_tokens = -1;
  int64_t prompt_tokens = 0;
  FinishReason finish = FinishReason::none;
  std::string error;
  ErrorKind error_kind = ErrorKind::internal;  // meaningful when finish is error
  bool done = false;
  int64_t first_event = -1,
          last_event = -1;  // engine-wide event order (overlap = in flight together)
};

// Collects events of many requests; wait() blocks until all have finished.
class Collector {
 public:
  EventSink sink(size_t slot) {
    {
      std::lock_guard lk(mu_);
      if (outcomes_.size() <= slot) outcomes_.resize(slot + 1);
    }
    return [this, slot](RequestEvent&& ev) {
      {
        std::unique_lock g(gate_mu_);
        gate_cv_.wait(g, [&] { return !held_; });
      }
      std::lock_guard lk(mu_);
      Outcome& o = outcomes_[slot];
      if (o.first_event < 0) o.first_event = n_events_;
      o.last_event = n_events_++;
      for (auto& [pos, row] : ev.logits) o.logits[pos] = std::move(row);
      if (ev.kind == EventKind::token) {
        o.generated.push_back(ev.token);
        o.logprobs.push_back(ev.logprob);
        o.tops.push_back(ev.top);
      }
      if (ev.kind == EventKind::finished) {
        o.cached_tokens = ev.usage.cached_tokens;
        o.drafted = ev.usage.draft_tokens;
        o.accepted = ev.usage.accepted_draft_tokens;
        o.prompt_tokens = ev.usage.prompt_tokens;
        o.finish = ev.finish;
        o.error = ev.error;
        o.error_kind = ev.error_kind;
        o.done = true;
        cv_.notify_all();
      }
    };
  }
  // While held, the engine thread waits at its first event: requests submitted together are
  // all queued before any of them can finish, however the test thread is scheduled.
  void hold() {
    std::lock_guard g(gate_mu_);
    held_ = true;
  }
  void release() {
    {
      std::lock_guard g(gate_mu_);
      held_ = false;
    }
    gate_cv_.notify_all();
  }
  void wait(size_t n) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] {
      if (outcomes_.size() < n) return false;
      for (size_t i = 0; i < n; ++i)
        if (!outcomes_[i].done) return false;
      return true;
    });
  }
  Outcome take(size_t slot) {
    std::lock_guard lk(mu_);
    return outcomes_[slot];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Outcome> outcomes_;
  int64_t n_events_ = 0;
  std::mutex gate_mu_;
  std::condition_variable gate_cv_;
  bool held_ = false;
};

inline GenerationRequest request_make(std::vector<int32_t> prompt, int64_t max_tokens,
                                      bool capture) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.capture_logits = capture;
  return r;
}

// Runs the requests one after another (each waits for the previous): the cache-warming order.
// With the caller's drafter when one is given, else the one cfg.spec names.
inline std::vector<Outcome> run_sequential(const Model& m, const EngineConfig& cfg,
                                           const std::vector<GenerationRequest>& reqs,
                                           EngineMetrics* metrics = nullptr,
                                           std::unique_ptr<Drafter> drafter = nullptr) {
  auto engine = drafter ? std::make_unique<Engine>(m, nullptr, cfg, std::move(drafter))
                        : std::make_unique<Engine>(m, nullptr, cfg);
  Collector col;
  std::vector<Outcome> out;
  for (size_t i = 0; i < reqs.size(); ++i) {
    engine->submit(reqs[i], col.sink(i));
    col.wait(i + 1);
    out.push_back(col.take(i));
  }
  if (metrics) *metrics = engine->metrics();
  return out;
}

// Submits all requests at once (they share engine steps), returns them in order.
inline std::vector<Outcome> run_together(const Model& m, const EngineConfig& cfg,
                                         const std::vector<GenerationRequest>& reqs,
                                         EngineMetrics* metrics = nullptr) {
  Engine engine(m, nullptr, cfg);
  Collector col;
  for (size_t i = 0; i < reqs.size(); ++i) col.sink(i);
  col.hold();
  try {
    for (size_t i = 0; i < reqs.size(); ++i) engine.submit(reqs[i], col.sink(i));
  } catch (...) {
    col.release();  // the engine thread must not stay held while the engine joins it
    throw;
  }
  col.release();
  col.wait(reqs.size());
  std::vector<Outcome> out;
  for (size_t i = 0; i < reqs.size(); ++i) out.push_back(col.take(i));
  if (metrics) *metrics = engine.metrics();
  return out;
}

// The contract, checked: identical generated tokens and identical logits bits at every
// position both computed, which must include the last prompt position and every generated one.
inline void expect_same_bits(const Outcome& ref, const Outcome& got, int64_t prompt_len,
                             const std::string& what) {
  ASSERT_TRUE(ref.done && got.done) << what;
  ASSERT_EQ(ref.finish, got.finish) << what << ": " << got.error;
  EXPECT_EQ(ref.generated, got.generated) << what;
  const int64_t last = prompt_len + static_cast<int64_t>(got.generated.size()) - 2;
  int64_t compared = 0;
  for (int64_t p = prompt_len - 1; p <= last; ++p) {
    ASSERT_TRUE(ref.logits.count(p) && got.logits.count(p)) << what << ": no logits at " << p;
  }
  for (const auto& [p, row] : got.logits) {
    const auto it = ref.logits.find(p);
    if (it == ref.logits.end()) continue;
    ASSERT_EQ(row.size(), it->second.size());
    if (std::memcmp(row.data(), it->second.data(), row.size() * sizeof(float)) != 0) {
      size_t j = 0;
      while (j < row.size() && std::memcmp(&row[j], &it->second[j], sizeof(float)) == 0) ++j;
      FAIL() << what << ": logits differ at position " << p << ", token " << j << ": "
             << it->second[j] << " vs " << row[j];
    }
    ++compared;
  }
  EXPECT_GE(compared, last - (prompt_len - 1) + 1) << what;
}

// The probe's digest of a completion (docs/digest.md): SHA-256 over every generated token id,
// its logprob bits and its candidates (ids and logprob bits) in engine order.
inline std::string digest_of(const Outcome& o) {
  std::string bytes;
  auto put = [&bytes](const void* p, size_t n) { bytes.append(static_cast<const char*>(p), n); };
  for (size_t i = 0; i < o.generated.size(); ++i) {
    put(&o.generated[i], 4);
    put(&o.logprobs[i], 4);
    const auto n = static_cast<uint32_t>(o.tops[i].size());
    put(&n, 4);
    for (const TokenLogprob& t : o.tops[i]) {
      put(&t.id, 4);
      put(&t.logprob, 4);
    }
  }
  return sha256_hex(bytes);
}

inline std::vector<int32_t> tokens_random(std::mt19937& rng, int64_t n, int64_t n_vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  // Below the special ids (the last three of the reference vocabulary).
  for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_vocab - 3));
  return t;
}

inline std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

inline EngineConfig config_base() {
  EngineConfig c;
  c.block_size = 16;
  c.cache_bytes = 64ll << 20;
  c.max_batch_tokens = 4096;
  c.threads = 1;
  return c;
}

inline std::vector<std::string> reference_models() {
  return {"qwen3next-tiny", "qwen35-tiny"};
}

// The test-name suffix of a reference model parameter.
inline std::string reference_model_label(const ::testing::TestParamInfo<std::string>& info) {
  return info.param == "qwen35-tiny" ? std::string("qwen35") : std::string("qwen3next");
}

}  // namespace invar::testing_engine
