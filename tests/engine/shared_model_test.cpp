// Two engines on one loaded Model, computing at the same time, give the same bits as each
// alone: the model holds no per-call state (each engine's runner owns its forward scratch).
#include <atomic>
#include <chrono>
#include <thread>

#include "invariance_harness.h"

namespace invar::testing_engine {
namespace shared_model_test {

// Holds each engine's token k until the other engine has produced token k too, so the two
// engines' forward passes interleave step by step instead of one finishing first.
class Lockstep {
 public:
  EventSink wrap(int side, EventSink inner) {
    return [this, side, inner = std::move(inner)](RequestEvent&& ev) mutable {
      if (ev.kind == EventKind::token) {
        const int64_t mine = ++count_[side];
        std::unique_lock lk(mu_);
        cv_.notify_all();
        if (!cv_.wait_for(lk, std::chrono::seconds(30),
                          [&] { return count_[1 - side].load() >= mine || finished_[1 - side]; }))
          timed_out_ = true;
        if (count_[1 - side].load() >= mine) ++interleaved_;
      }
      if (ev.kind == EventKind::finished) {
        std::lock_guard lk(mu_);
        finished_[side] = true;
        cv_.notify_all();
      }
      inner(std::move(ev));
    };
  }
  int64_t interleaved() const { return interleaved_; }
  bool timed_out() const { return timed_out_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int64_t> count_[2] = {0, 0};
  bool finished_[2] = {false, false};
  std::atomic<int64_t> interleaved_{0};
  bool timed_out_ = false;
};

TEST(SharedModel, TwoEnginesConcurrentlyGiveTheBitsOfOneAlone) {
  const Model& m = model_get("qwen3next-tiny");
  std::mt19937 rng(11);
  const int64_t V = m.hparams().n_vocab;
  const auto pa = tokens_random(rng, 45, V), pb = tokens_random(rng, 70, V);
  const GenerationRequest ra = request_make(pa, 24, true), rb = request_make(pb, 24, true);
  EngineConfig ca = config_base(), cb = config_base();
  cb.max_batch_tokens = 13;  // chunked prefill: a different batch shape and scratch size
  cb.threads = 2;
  const Outcome alone_a = run_sequential(m, ca, {ra})[0];
  const Outcome alone_b = run_sequential(m, cb, {rb})[0];
  ASSERT_EQ(alone_a.generated.size(), 24u);
  ASSERT_EQ(alone_b.generated.size(), 24u);

  Lockstep step;
  Collector col;
  {
    Engine ea(m, nullptr, ca), eb(m, nullptr, cb);
    ea.submit(ra, step.wrap(0, col.sink(0)));
    eb.submit(rb, step.wrap(1, col.sink(1)));
    col.wait(2);
  }
  EXPECT_FALSE(step.timed_out());
  EXPECT_GE(step.interleaved(), 40) << "the engines did not compute side by side";
  expect_same_bits(alone_a, col.take(0), int64_t(pa.size()), "engine A beside engine B");
  expect_same_bits(alone_b, col.take(1), int64_t(pb.size()), "engine B beside engine A");
}

}  // namespace shared_model_test
}  // namespace invar::testing_engine
