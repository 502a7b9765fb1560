#include "engine/request_queue.h"

#include <chrono>
#include <string>

namespace invar {

std::vector<RequestId> RequestQueue::submit(SequenceGroup g) {
  std::lock_guard lk(mu_);
  if (stop_ || draining_)
    throw EngineError(ErrorKind::shutting_down, "", "the engine is shutting down");
  const int64_t queued = static_cast<int64_t>(snapshot_.groups_waiting + inbox_.size());
  if (queued >= max_queue_)
    throw EngineError(
        ErrorKind::overloaded, "",
        "overloaded: the queue is full (" + std::to_string(queued) + " requests waiting)");
  std::vector<RequestId> ids;
  for (auto& s : g) {
    s->id = next_id_++;
    ids.push_back(s->id);
  }
  n_live_ += static_cast<int64_t>(g.size());
  n_inbox_ += static_cast<int64_t>(g.size());
  inbox_.push_back(std::move(g));
  cv_work_.notify_all();
  return ids;
}

void RequestQueue::cancel(RequestId id) {
  std::lock_guard lk(mu_);
  cancels_.push_back(id);
  cv_work_.notify_all();
}

EngineMetrics RequestQueue::metrics() const {
  std::lock_guard lk(mu_);
  return snapshot_;
}

void RequestQueue::drain(double timeout_s) {
  std::unique_lock lk(mu_);
  draining_ = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  if (!cv_idle_.wait_until(lk, deadline, [&] { return n_live_ == 0; })) {
    cancel_all_ = true;
    cv_work_.notify_all();
    cv_idle_.wait(lk, [&] { return n_live_ == 0; });
  }
}

void RequestQueue::stop() {
  std::lock_guard lk(mu_);
  stop_ = true;
  cv_work_.notify_all();
}

void RequestQueue::take(Intake& in, bool busy) {
  in.fresh.clear();
  in.cancels.clear();
  std::unique_lock lk(mu_);
  cv_work_.wait(
      lk, [&] { return stop_ || cancel_all_ || busy || !inbox_.empty() || !cancels_.empty(); });
  in.stop = stop_;
  in.fresh.swap(inbox_);
  n_inbox_ = 0;
  in.cancels.swap(cancels_);
  in.cancel_all = cancel_all_;
  cancel_all_ = false;
}

void RequestQueue::publish(const EngineMetrics& m, int64_t n_held) {
  std::lock_guard lk(mu_);
  snapshot_ = m;
  n_live_ = n_held + n_inbox_;
  if (n_live_ == 0) cv_idle_.notify_all();
}

}  // namespace invar
