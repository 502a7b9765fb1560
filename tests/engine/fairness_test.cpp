// Fairness costs no bit (DESIGN.md C3): a request beside the attacker's — 128 choices of 3000
// tokens each from another client — gets the same tokens and logits bits as alone, and while it
// runs the attacker computes at most one token per step of it (fair_share.h, ratio 1), counted
// in the engine's own event order, not in time. The n choices of one request share one prefill:
// the later ones hit the first one's blocks and still equal their n = 1 runs bit for bit. A
// request that yields its seat to a newcomer (seat rotation) resumes with the same bits.
#include <atomic>
#include <chrono>
#include <thread>

#include "invariance_harness.h"

namespace invar::testing_engine {
namespace fairness_test {

class Fairness : public ::testing::TestWithParam<std::string> {};

int64_t tokens_of(Collector& col, size_t lo, size_t hi) {
  int64_t n = 0;
  for (size_t i = lo; i < hi; ++i) n += static_cast<int64_t>(col.take(i).generated.size());
  return n;
}

TEST_P(Fairness, BesideTheAttackersRequestSameBitsBoundedWait) {
  const Model& m = model_get(GetParam());
  const int64_t V = m.hparams().n_vocab;
  std::mt19937 rng(71);
  GenerationRequest b = request_make(tokens_random(rng, 30, V), 8, true);
  b.sampling.temperature = 0.7f;
  b.sampling.seed = 3;
  b.top_logprobs = 5;
  b.client_key = "victim";
  EngineConfig cfg = config_base();
  const Outcome alone = run_sequential(m, cfg, {b})[0];

  Collector col;  // outlives the engine, which cancels the attacker when it goes
  Engine engine(m, nullptr, cfg);
  const size_t n_attack = 128;
  std::vector<GenerationRequest> attack;
  std::vector<EventSink> sinks;
  for (size_t i = 0; i < n_attack; ++i) {
    GenerationRequest r = request_make({5, 6, 7}, 3000, false);
    r.sampling.temperature = 1.0f;
    r.sampling.seed = i;
    r.top_logprobs = 20;
    r.client_key = "attacker";
    attack.push_back(r);
    sinks.push_back(col.sink(1 + i));
  }
  col.sink(0);
  engine.submit_group(std::move(attack), std::move(sinks));
  // The attacker fills the engine first: every slot, several steps.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (tokens_of(col, 1, 1 + n_attack) < 4 * cfg.max_running &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_GE(tokens_of(col, 1, 1 + n_attack), 4 * cfg.max_running) << "the attacker never ran";
  const uint64_t preempted_before = engine.metrics().preemptions;

  engine.submit(b, col.sink(0));
  col.wait(1);
  const Outcome got = col.take(0);
  expect_same_bits(alone, got, static_cast<int64_t>(b.prompt.size()), "beside the attacker");

  // The condition really happened: the attacker was computing before and after B.
  int64_t before = 0, after = 0;
  for (const int64_t seen = tokens_of(col, 1, 1 + n_attack);
       tokens_of(col, 1, 1 + n_attack) == seen && std::chrono::steady_clock::now() < deadline;)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (size_t i = 1; i <= n_attack; ++i) {
    const Outcome o = col.take(i);
    before += o.first_event >= 0 && o.first_event < got.first_event;
    after += o.last_event > got.last_event;
  }
  EXPECT_GT(before, 0);
  EXPECT_GT(after, 0) << "the attacker stopped while B ran";
  EXPECT_GT(engine.metrics().preemptions, preempted_before)
      << "B found a free slot: the attacker did not hold them all";
  // B's events are its 8 tokens and its end; everything else between its first and last event
  // is the attacker's: at most one token per step of B's (unbounded before: 63 per step).
  const int64_t window = got.last_event - got.first_event + 1;
  const int64_t attacker_events = window - (static_cast<int64_t>(got.generated.size()) + 1);
  std::printf("attacker tokens computed while B produced its %zu: %lld\n", got.generated.size(),
              static_cast<long long>(attacker_events));
  EXPECT_LE(attacker_events, static_cast<int64_t>(got.generated.size()));
}

// Every seat held by a long single-choice request of one client (each at its share, so shares
// free no seat): a newcomer gets its first token within a step of arriving by seat rotation, and
// the request that yielded its seat resumes from the prefix cache and still equals its solo run
// bit for bit, as do all the others. Counted in the engine's event order: the newcomer is
// submitted from the engine thread itself, at a known event. Without rotation it waits for a
// whole completion.
TEST_P(Fairness, NewcomerBesideSeatsFullOfLongRequestsGetsASeatSameBits) {
  const Model& m = model_get(GetParam());
  const int64_t V = m.hparams().n_vocab;
  std::mt19937 rng(73);
  const size_t n_long = 4;
  const int64_t long_tokens = 48, arrive_after = 16;
  std::vector<GenerationRequest> reqs;
  for (size_t i = 0; i <= n_long; ++i) {
    const bool newcomer = i == n_long;
    GenerationRequest r = request_make(tokens_random(rng, newcomer ? 9 : 20 + int64_t(i), V),
                                       newcomer ? 4 : long_tokens, true);
    r.sampling.temperature = 0.8f;
    r.sampling.seed = 40 + i;
    r.top_logprobs = 3;
    r.client_key = "one address";
    reqs.push_back(r);
  }
  EngineConfig cfg = config_base();
  cfg.max_running = int64_t(n_long);
  const std::vector<Outcome> solo = run_sequential(m, cfg, reqs);

  for (int64_t quantum : {8, 0}) {
    SCOPED_TRACE("seat_quantum " + std::to_string(quantum));
    cfg.seat_quantum = quantum;
    Collector col;
    for (size_t i = 0; i <= n_long; ++i) col.sink(i);
    std::atomic<int64_t> submitted_at{-1};
    EventSink newcomer_sink = col.sink(n_long);
    Engine engine(m, nullptr, cfg);
    EventSink first = [&, inner = col.sink(0)](RequestEvent&& ev) {
      const bool token = ev.kind == EventKind::token;
      inner(std::move(ev));
      const Outcome o = col.take(0);
      if (token && int64_t(o.generated.size()) == arrive_after) {
        submitted_at = o.last_event;
        engine.submit(reqs[n_long], std::move(newcomer_sink));
      }
    };
    col.hold();  // every long request is queued before the first computes
    engine.submit(reqs[0], std::move(first));
    for (size_t i = 1; i < n_long; ++i) engine.submit(reqs[i], col.sink(i));
    col.release();
    col.wait(n_long + 1);

    const Outcome got = col.take(n_long);
    ASSERT_GE(submitted_at.load(), 0);
    // Between its arrival and its first token: the rest of the step in flight, then its own
    // step's decodes: under two steps of the others' tokens.
    const int64_t waited = got.first_event - submitted_at.load() - 1;
    std::printf("seat_quantum %lld: other requests' events before the newcomer's first: %lld\n",
                static_cast<long long>(quantum), static_cast<long long>(waited));
    const EngineMetrics em = engine.metrics();
    if (quantum > 0) {
      EXPECT_LT(waited, 2 * cfg.max_running);
      EXPECT_EQ(em.seat_rotations, 1u) << "one newcomer, one seat yielded";
    } else {
      EXPECT_GT(waited, (long_tokens - arrive_after - 1) * (cfg.max_running - 1))
          << "without rotation the newcomer waits for a whole completion";
      EXPECT_EQ(em.seat_rotations, 0u);
    }
    for (size_t i = 0; i <= n_long; ++i)
      expect_same_bits(solo[i], col.take(i), static_cast<int64_t>(reqs[i].prompt.size()),
                       "request " + std::to_string(i));
  }
}

TEST_P(Fairness, ChoicesShareOnePrefillAndEqualTheirSoloRuns) {
  const Model& m = model_get(GetParam());
  const int64_t V = m.hparams().n_vocab;
  std::mt19937 rng(72);
  const auto prompt = tokens_random(rng, 70, V);
  EngineConfig cfg = config_base();
  const int n = 4;
  std::vector<GenerationRequest> reqs;
  std::vector<Outcome> solo;
  for (int i = 0; i < n; ++i) {
    GenerationRequest r = request_make(prompt, 5, true);
    r.sampling.temperature = 0.9f;
    r.sampling.seed = 10 + static_cast<uint64_t>(i);
    reqs.push_back(r);
    cfg.prefix_cache = false;  // each solo run computes its prompt itself
    solo.push_back(run_sequential(m, cfg, {r})[0]);
  }
  cfg.prefix_cache = true;
  Engine engine(m, nullptr, cfg);
  Collector col;
  std::vector<EventSink> sinks;
  for (int i = 0; i < n; ++i) sinks.push_back(col.sink(static_cast<size_t>(i)));
  engine.submit_group(reqs, std::move(sinks));
  col.wait(n);
  for (int i = 0; i < n; ++i) {
    const Outcome o = col.take(static_cast<size_t>(i));
    expect_same_bits(solo[static_cast<size_t>(i)], o, 70, "choice " + std::to_string(i));
    // Choice 0 computes the prompt; the others take its 4 full blocks (69 positions looked up).
    EXPECT_EQ(o.cached_tokens, i == 0 ? 0 : 64) << "choice " << i;
  }
  const EngineMetrics em = engine.metrics();
  EXPECT_EQ(em.prompt_tokens_total - em.cached_tokens_total, uint64_t(70 + (n - 1) * 6))
      << "prompt positions computed: once, plus each later choice's last partial block";
}

INSTANTIATE_TEST_SUITE_P(Models, Fairness, ::testing::ValuesIn(reference_models()),
                         reference_model_label);

}  // namespace fairness_test
}  // namespace invar::testing_engine
