// The Engine API on a reference model: validation, stop tokens, cancellation, prompt logprobs,
// seeded sampling, and a random load with cancellations that must leave no block referenced.
#include <cstring>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "gguf/gguf.h"
#include "invariance_harness.h"
#include "tokenizer/tokenizer.h"

namespace invar::testing_engine {
namespace engine_api_test {

const Model& tiny() {
  return model_get("qwen3next-tiny");
}

TEST(EngineApi, RejectsBadRequestsWithAMessage) {
  EngineConfig cfg = config_base();
  cfg.n_ctx = 64;
  Engine e(tiny(), nullptr, cfg);
  auto expect_error = [&](GenerationRequest r, const std::string& needle) {
    try {
      e.submit(std::move(r), nullptr);
      ADD_FAILURE() << "accepted; expected: " << needle;
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(needle), std::string::npos) << err.what();
    }
  };
  expect_error(request_make({}, 4, false), "empty");
  expect_error(request_make({1, 100000}, 4, false), "outside the vocabulary");
  expect_error(request_make(std::vector<int32_t>(60, 5), 10, false), "context limit");
  GenerationRequest r = request_make({1, 2}, 4, false);
  r.stop_strings = {"x"};
  expect_error(r, "tokenizer");
  r = request_make({1, 2}, 4, false);
  r.top_logprobs = 21;
  expect_error(r, "top_logprobs");
  r = request_make({1, 2}, 4, false);
  r.sampling.top_p = 0.0f;
  expect_error(r, "top_p");
}

// A file whose weights are finite but overflow (output.weight's row 7 at ±3e38) passes the
// load-time scale check and makes the logit of token 7 non-finite at every position: each
// request ends with ErrorKind::nonfinite's message, and no token or logprob is reported.
TEST(EngineApi, NonFiniteLogitsEndTheRequestWithAnError) {
  const std::string src = std::string(INVAR_TEST_DATA_DIR) + "/models/qwen3next-tiny.gguf";
  std::ifstream in(src, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  {
    auto f = GgufFile::open(src);
    const GgufTensorInfo* out = f->find_tensor("output.weight");
    ASSERT_TRUE(out && out->type == DType::F32);
    const int64_t k = out->ne[0];
    const size_t at = size_t(out->data - f->bytes()) + size_t(7 * k) * 4;
    for (int64_t i = 0; i < k; ++i) {
      const float v = i % 2 ? -3e38f : 3e38f;
      std::memcpy(bytes.data() + at + size_t(i) * 4, &v, 4);
    }
  }
  const std::string path = ::testing::TempDir() + "/nonfinite_logits.gguf";
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  const auto m = Model::load(path);
  GenerationRequest r = request_make({1, 2, 3}, 4, false);
  r.top_logprobs = 2;
  const auto o = run_sequential(*m, config_base(), {r})[0];
  EXPECT_EQ(o.finish, FinishReason::error);
  EXPECT_NE(o.error.find("non-finite logit"), std::string::npos) << o.error;
  EXPECT_NE(o.error.find("for token 7"), std::string::npos) << o.error;
  EXPECT_TRUE(o.generated.empty());
  // The same request on the intact file runs: the error comes from the damaged row.
  const auto good = run_sequential(tiny(), config_base(), {r})[0];
  EXPECT_EQ(good.finish, FinishReason::length);
  std::remove(path.c_str());
}

TEST(EngineApi, StopTokenMaxTokensAndZeroMaxTokens) {
  std::mt19937 rng(1);
  const auto p = tokens_random(rng, 30, tiny().hparams().n_vocab);
  const auto free_run = run_sequential(tiny(), config_base(), {request_make(p, 6, false)})[0];
  ASSERT_EQ(free_run.generated.size(), 6u);
  EXPECT_EQ(free_run.finish, FinishReason::length);
  GenerationRequest r = request_make(p, 6, false);
  r.stop_tokens = {free_run.generated[2]};
  const auto stopped = run_sequential(tiny(), config_base(), {r})[0];
  EXPECT_EQ(stopped.finish, FinishReason::stop);
  // Stops at the first occurrence of the stop token.
  size_t first = 0;
  while (free_run.generated[first] != free_run.generated[2]) ++first;
  EXPECT_EQ(stopped.generated.size(), first + 1);
  const auto none = run_sequential(tiny(), config_base(), {request_make(p, 0, false)})[0];
  EXPECT_EQ(none.finish, FinishReason::length);
  EXPECT_TRUE(none.generated.empty());
}

// min_tokens masks the stop tokens before selection only: where the free run stops at token
// `first`, the run with min_tokens goes on, picks the best token that is not a stop token
// there, and reports the logprobs of the model's own rows, equal bit for bit to the free run's
// at every position both reached (the masked position included), as a grammar's mask does.
TEST(EngineApi, MinTokensMasksStopTokensNotLogprobs) {
  std::mt19937 rng(1);
  const auto p = tokens_random(rng, 30, tiny().hparams().n_vocab);
  GenerationRequest r = request_make(p, 8, false);
  r.top_logprobs = 3;
  const auto free_run = run_sequential(tiny(), config_base(), {r})[0];
  ASSERT_EQ(free_run.generated.size(), 8u);
  const int32_t stop = free_run.generated[2];
  size_t first = 0;
  while (free_run.generated[first] != stop) ++first;
  r.stop_tokens = {stop};
  const auto stopped = run_sequential(tiny(), config_base(), {r})[0];
  ASSERT_EQ(stopped.generated.size(), first + 1) << "the stop token ends the request at once";
  r.sampling.min_tokens = int64_t(first) + 3;
  const auto held = run_sequential(tiny(), config_base(), {r})[0];
  ASSERT_GE(held.generated.size(), first + 3);
  for (size_t i = 0; i < first + 3; ++i) EXPECT_NE(held.generated[i], stop) << "token " << i;
  for (size_t i = 0; i < first; ++i) EXPECT_EQ(held.generated[i], free_run.generated[i]);
  // Position `first`: the same row, so the same candidates bit for bit; the token is the best
  // one that is not the stop token, reported with its unmasked logprob.
  const auto bits = [](float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    return u;
  };
  for (size_t i = 0; i <= first; ++i) {
    ASSERT_EQ(held.tops[i].size(), free_run.tops[i].size());
    for (size_t k = 0; k < held.tops[i].size(); ++k) {
      EXPECT_EQ(held.tops[i][k].id, free_run.tops[i][k].id) << i;
      EXPECT_EQ(bits(held.tops[i][k].logprob), bits(free_run.tops[i][k].logprob)) << i;
    }
  }
  const auto& top = free_run.tops[first];
  const size_t alt = top[0].id == stop ? 1 : 0;
  EXPECT_EQ(held.generated[first], top[alt].id);
  EXPECT_EQ(bits(held.logprobs[first]), bits(top[alt].logprob));
  // min_tokens above max_tokens is the request's fault.
  r.sampling.min_tokens = 9;
  Engine e(tiny(), nullptr, config_base());
  try {
    e.submit(r, nullptr);
    ADD_FAILURE() << "min_tokens > max_tokens accepted";
  } catch (const EngineError& err) {
    EXPECT_EQ(err.param(), "min_tokens") << err.what();
  }
}

TEST(EngineApi, StopStringEndsTheRequest) {
  const auto tok =
      Tokenizer::from_file(std::string(INVAR_TEST_DATA_DIR) + "/models/qwen3next-tiny.gguf");
  std::mt19937 rng(5);
  const auto p = tokens_random(rng, 30, tiny().hparams().n_vocab);
  const auto free_run = run_sequential(tiny(), config_base(), {request_make(p, 8, false)})[0];
  ASSERT_EQ(free_run.generated.size(), 8u);
  // The text of generated tokens 3..4 as a stop string: the request ends once it is complete.
  const std::string text = tok->decode(std::span(free_run.generated.data() + 3, 2));
  ASSERT_FALSE(text.empty());
  const std::string before = tok->decode(std::span(free_run.generated.data(), 3));
  Engine e(tiny(), tok.get(), config_base());
  Collector col;
  GenerationRequest r = request_make(p, 8, false);
  r.stop_strings = {text};
  e.submit(r, col.sink(0));
  col.wait(1);
  const Outcome o = col.take(0);
  EXPECT_EQ(o.finish, FinishReason::stop);
  // It may complete earlier if the text already appears there, never later than token 4.
  EXPECT_LE(o.generated.size(), 5u);
  if (before.find(text) == std::string::npos && o.generated.size() < 5u) {
    const std::string got = tok->decode(std::span(o.generated.data(), o.generated.size()));
    EXPECT_NE(got.find(text), std::string::npos);
  }
}

TEST(EngineApi, PromptLogprobsComputeEveryPosition) {
  std::mt19937 rng(2);
  const auto p = tokens_random(rng, 40, tiny().hparams().n_vocab);
  Engine e(tiny(), nullptr, config_base());
  Collector col;
  e.submit(request_make(p, 1, false), col.sink(0));
  col.wait(1);
  std::vector<int64_t> positions;
  std::mutex mu;
  GenerationRequest r = request_make(p, 1, false);
  r.prompt_logprobs = 2;
  e.submit(r, [&, sink = col.sink(1)](RequestEvent&& ev) mutable {
    if (ev.kind == EventKind::prompt_logprobs) {
      std::lock_guard lk(mu);
      positions.push_back(ev.position);
      EXPECT_EQ(ev.top.size(), 2u);
      EXPECT_LE(ev.logprob, 0.0f);
    }
    sink(std::move(ev));
  });
  col.wait(2);
  EXPECT_EQ(col.take(1).cached_tokens, 0) << "prompt logprobs must not skip positions";
  ASSERT_EQ(positions.size(), p.size() - 1);
  for (size_t i = 0; i < positions.size(); ++i)
    EXPECT_EQ(positions[i], static_cast<int64_t>(i + 1));
}

TEST(EngineApi, SeededSamplingIsReproducible) {
  std::mt19937 rng(3);
  const auto p = tokens_random(rng, 20, tiny().hparams().n_vocab);
  GenerationRequest r = request_make(p, 12, false);
  r.sampling.temperature = 1.5f;
  r.sampling.seed = 77;
  const auto one = run_sequential(tiny(), config_base(), {r, r});
  EXPECT_EQ(one[0].generated, one[1].generated);
  r.sampling.seed = 78;
  const auto other = run_sequential(tiny(), config_base(), {r})[0];
  EXPECT_NE(one[0].generated, other.generated);
}

TEST(EngineApi, RandomLoadWithCancellationsLeaksNothing) {
  const Model& m = tiny();
  EngineConfig cfg = config_base();
  cfg.max_batch_tokens = 48;
  cfg.max_running = 8;
  cfg.cache_bytes = cache_bytes_for(m, 16, 40, 8);
  Engine e(m, nullptr, cfg);
  Collector col;
  std::mt19937 rng(4);
  const auto doc = tokens_random(rng, 40, m.hparams().n_vocab);
  std::vector<RequestId> ids;
  for (size_t i = 0; i < 200; ++i) {
    const auto tail = tokens_random(rng, 1 + static_cast<int64_t>(rng() % 60), m.hparams().n_vocab);
    GenerationRequest r = request_make(rng() % 2 ? concat(doc, tail) : tail, 1 + rng() % 20, false);
    ids.push_back(e.submit(r, col.sink(i)));
    if (rng() % 4 == 0) e.cancel(ids[rng() % ids.size()]);
    if (rng() % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  col.wait(200);
  int cancelled = 0, hits = 0;
  for (size_t i = 0; i < 200; ++i) {
    const Outcome o = col.take(i);
    EXPECT_NE(o.finish, FinishReason::error) << o.error;
    cancelled += o.finish == FinishReason::cancelled;
    hits += o.cached_tokens > 0;
  }
  e.drain(5);
  const EngineMetrics met = e.metrics();
  EXPECT_GT(cancelled, 0);
  EXPECT_GT(hits, 0);
  EXPECT_EQ(met.referenced_blocks, 0u);
  EXPECT_EQ(met.requests_running + met.requests_waiting, 0u);
  EXPECT_LE(met.resident_bytes, static_cast<uint64_t>(cfg.cache_bytes));
  EXPECT_EQ(met.requests_total, 200u);
}

}  // namespace engine_api_test
}  // namespace invar::testing_engine
