// A response whose request is prepared on the PreparePool (prepare_pool.h): undecided (its
// connection does not yet know whether it streams) until the work has run on a pool thread,
// then whatever the work routed — a reply, or a pending completion it now polls on.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>

#include "server/http_transport.h"
#include "server/prepare_pool.h"

namespace invar::server {

class PendingPrepared : public PendingReply {
 public:
  // True once the client is gone: long work (the vision tower) asks it between its units.
  using Cancelled = std::shared_ptr<const std::atomic<bool>>;
  using Work = std::function<Routed(const Cancelled&)>;  // on a pool thread; must not throw
  // On the connection's strand, once, when the work's result is taken (to log or time it).
  using Taken = std::function<void(Routed&)>;

  // Queues the work; null when the pool's queue is full. `wake` tells the connection the work
  // is done.
  static std::unique_ptr<PendingPrepared> start(PreparePool& pool, Work work, Waker wake,
                                                Taken taken);
  ~PendingPrepared() override;  // a result that comes later is dropped (its client is gone)

  bool decided() const override;
  bool streaming() const override { return inner_ && inner_->streaming(); }
  bool poll(bool tick, std::string* out) override;
  HttpReply reply() override { return inner_ ? inner_->reply() : std::move(result_.reply); }
  void client_gone() override;

 private:
  struct State {
    std::mutex mu;
    bool done = false, abandoned = false;
    Routed result;
    std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);
    void abandon() {  // under mu
      abandoned = true;
      cancelled->store(true);
    }
  };
  PendingPrepared(std::shared_ptr<State> st, Taken taken)
      : st_(std::move(st)), taken_(std::move(taken)) {}
  bool take() const;  // moves the result out once it is there

  std::shared_ptr<State> st_;
  Taken taken_;
  mutable bool taken_done_ = false;
  mutable Routed result_;
  mutable std::unique_ptr<PendingReply> inner_;
};

}  // namespace invar::server
