#include "server/backend.h"

#include <limits>

#include "core/error.h"

namespace invar::server {

std::vector<RequestId> BackendGeneration::submit_group(std::vector<GenerationRequest> reqs,
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

RequestLimits Backend::request_limits() const {
  RequestLimits lim;
  lim.n_vocab = n_vocab();
  lim.n_ctx = n_ctx();
  lim.block_size = 1;
  lim.block_capacity = std::numeric_limits<int64_t>::max() / 2;
  lim.has_tokenizer = true;
  return lim;
}

PromptImages BackendVision::images_encode(std::span<const std::string>, const EncodeBounds&) const {
  throw Error("this server has no vision tower: start it with --mmproj FILE to take images");
}

int64_t BackendVision::image_tokens(const std::string&) const {
  throw Error("this server has no vision tower: start it with --mmproj FILE to take images");
}

}  // namespace invar::server
