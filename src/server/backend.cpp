#include "server/backend.h"

namespace invar::server {

std::vector<RequestId> Backend::submit_group(std::vector<GenerationRequest> reqs,
                                             std::vector<EventSink> sinks) {
  std::vector<RequestId> ids;
  try {
    for (size_t i = 0; i < reqs.size(); ++i)
      ids.push_back(submit(std::move(reqs[i]), std::move(sinks[i])));
  } catch (...) {
    for (RequestId id : ids) cancel(id);
    throw;
  }
  return ids;
}

}  // namespace invar::server
