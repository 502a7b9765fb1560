#include "server/pending_prepared.h"

namespace invar::server {

std::unique_ptr<PendingPrepared> PendingPrepared::start(PreparePool& pool, Work work, Waker wake,
                                                        Taken taken) {
  auto st = std::make_shared<State>();
  const bool queued = pool.submit([st, work = std::move(work), wake = std::move(wake)] {
    {
      std::lock_guard<std::mutex> lock(st->mu);
      if (st->abandoned) return;
    }
    Routed r = work(st->cancelled);
    std::unique_ptr<PendingReply> orphan;
    {
      std::lock_guard<std::mutex> lock(st->mu);
      if (st->abandoned) {
        orphan = std::move(r.pending);
      } else {
        st->result = std::move(r);
        st->done = true;
      }
    }
    if (orphan) orphan->client_gone();  // then dropped: its engine requests are cancelled
    wake();
  });
  if (!queued) return nullptr;
  return std::unique_ptr<PendingPrepared>(new PendingPrepared(std::move(st), std::move(taken)));
}

PendingPrepared::~PendingPrepared() {
  std::unique_ptr<PendingReply> orphan;
  {
    std::lock_guard<std::mutex> lock(st_->mu);
    st_->abandon();
    if (st_->done) orphan = std::move(st_->result.pending);
  }
  if (orphan) orphan->client_gone();
}

bool PendingPrepared::take() const {
  if (taken_done_) return true;
  {
    std::lock_guard<std::mutex> lock(st_->mu);
    if (!st_->done) return false;
    result_ = std::move(st_->result);
  }
  taken_done_ = true;
  if (taken_) taken_(result_);
  inner_ = std::move(result_.pending);
  return true;
}

bool PendingPrepared::decided() const {
  return take();
}

bool PendingPrepared::poll(bool tick, std::string* out) {
  if (!take()) return false;
  return inner_ ? inner_->poll(tick, out) : true;
}

void PendingPrepared::client_gone() {
  if (inner_) return inner_->client_gone();
  std::lock_guard<std::mutex> lock(st_->mu);
  st_->abandon();
}

}  // namespace invar::server
