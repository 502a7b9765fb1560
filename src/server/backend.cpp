#include "server/backend.h"

#include "core/error.h"

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

PromptImages Backend::images_encode(std::span<const std::string>, const EncodeBounds&) const {
  throw Error("this server has no vision tower: start it with --mmproj FILE to take images");
}

int64_t Backend::image_tokens(const std::string&) const {
  throw Error("this server has no vision tower: start it with --mmproj FILE to take images");
}

}  // namespace invar::server
