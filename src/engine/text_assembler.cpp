#include "engine/text_assembler.h"

#include <algorithm>

#include "core/utf8.h"

namespace invar {

TextAssembler::TextAssembler(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (auto& s : stops_) max_stop_ = std::max(max_stop_, s.size());
}

std::string TextAssembler::push(std::string_view token_bytes, bool stops) {
  if (stopped_) return "";
  pending_.append(token_bytes);
  if (!stops) return utf8::release_complete(pending_, pending_.size());
  size_t hit = std::string::npos;
  for (auto& s : stops_) hit = std::min(hit, pending_.find(s));
  if (hit != std::string::npos) {
    stopped_ = true;
    std::string out = utf8::lossy(std::string_view(pending_).substr(0, hit));
    pending_.clear();
    return out;
  }
  // Keep the last max_stop − 1 bytes: they may be the start of a stop string.
  size_t keep = max_stop_ > 0 ? max_stop_ - 1 : 0;
  return utf8::release_complete(pending_, pending_.size() > keep ? pending_.size() - keep : 0);
}

std::string TextAssembler::finish() {
  return utf8::release_all(pending_);
}

}  // namespace invar
