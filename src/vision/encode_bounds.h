// What may stop an image's encode before the tower has run to its end: the client that asked is
// gone, or the request's CPU budget (invar serve --prepare-cpu-seconds) is spent. The tower asks
// between its units of work (vision_forward.h: before the patch embedding, before each block's
// attention and MLP halves, before the merger), so a stopped encode frees its threads within one
// unit, and one that runs to its end has the bits it always had.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "core/error.h"

namespace invar {

struct EncodeBounds {
  std::shared_ptr<const std::atomic<bool>> cancelled;  // true once the client is gone; null: never
  // CPU seconds the encode may take from its call on, on every thread of the tower (the calling
  // thread's decode and resize included); <= 0: unbounded.
  double cpu_budget_s = 0;
  // Whose cached encodes it may take and add to: the tenant (server/tenants.h). Entries of one
  // scope are never another's hit, so no tenant can time or count what another sent.
  std::string cache_scope;
};

enum class EncodeStop { cancelled, cpu_budget };

// What an encode throws when it stops: why, and the CPU it had taken (every thread's).
class EncodeStopped : public Error {
 public:
  EncodeStopped(EncodeStop why, double cpu_s)
      : Error(why == EncodeStop::cancelled
                  ? std::string("image: the encode was cancelled (the client is gone)")
                  : "image: the encode took " + std::to_string(cpu_s) +
                        " s of CPU, over its budget"),
        why(why),
        cpu_s(cpu_s) {}
  EncodeStop why;
  double cpu_s;
};

}  // namespace invar
