#include "engine/mask_prefetch.h"

#include "engine/constraint.h"

namespace invar {

MaskPrefetch::~MaskPrefetch() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lk(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void MaskPrefetch::start(const std::vector<SeqConstraint*>& work) {
  if (work.empty()) return;
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  {
    std::lock_guard lk(mu_);
    work_ = work;
    busy_ = true;
  }
  cv_.notify_all();
}

void MaskPrefetch::wait() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return !busy_; });
}

void MaskPrefetch::loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return busy_ || quit_; });
    if (quit_) return;
    const std::vector<SeqConstraint*> work = work_;
    lk.unlock();
    for (SeqConstraint* c : work)
      if (c->prefetch()) computed_.fetch_add(1, std::memory_order_relaxed);
    lk.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace invar
