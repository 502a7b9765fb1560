// The engine's inbox. Callers on any thread submit and cancel; the engine thread takes what
// arrived once per step and publishes the metrics callers read. Admission (queue limit,
// shutdown) is decided here, under the one lock callers and the engine thread share.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/engine_metrics.h"
#include "engine/request.h"
#include "engine/sequence.h"

namespace invar {

// The choices of one submit_group call (one of them for submit).
using SequenceGroup = std::vector<std::unique_ptr<Sequence>>;

struct Intake {
  std::vector<SequenceGroup> fresh;  // submitted since the last take, in order
  std::vector<RequestId> cancels;
  bool cancel_all = false;  // drain() ran out of time
  bool stop = false;        // the engine is being destroyed
};

class RequestQueue {
 public:
  explicit RequestQueue(int64_t max_queue) : max_queue_(max_queue) {}

  // Gives the sequences their ids and queues them as one group. Throws EngineError:
  // shutting_down after drain() or stop(), overloaded when max_queue groups already wait.
  std::vector<RequestId> submit(SequenceGroup g);
  void cancel(RequestId id);
  EngineMetrics metrics() const;
  // Refuses new work, waits up to timeout_s for every request to end, then has the engine
  // cancel the rest and waits for that.
  void drain(double timeout_s);
  void stop();

  // Engine thread: blocks until something arrived (or returns at once when `busy`), then moves
  // it into `in` (cleared first).
  void take(Intake& in, bool busy);
  // Engine thread: the metrics callers see and the count of requests it still holds.
  void publish(const EngineMetrics& m, int64_t n_held);

 private:
  const int64_t max_queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_work_;  // the engine thread waits for input
  std::condition_variable cv_idle_;  // drain() waits for the engine to empty
  std::vector<SequenceGroup> inbox_;
  std::vector<RequestId> cancels_;
  bool stop_ = false, draining_ = false, cancel_all_ = false;
  RequestId next_id_ = 1;
  int64_t n_live_ = 0;   // sequences submitted and not finished
  int64_t n_inbox_ = 0;  // sequences in inbox_
  EngineMetrics snapshot_;
};

}  // namespace invar
