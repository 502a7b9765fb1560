#include "grammar/vocabulary.h"

#include <algorithm>
#include <numeric>

#include "grammar/error.h"

namespace invar::grammar {

Vocabulary::Vocabulary(std::vector<std::string> token_bytes, std::vector<int32_t> eos_ids)
    : bytes_(std::move(token_bytes)), eos_(std::move(eos_ids)) {
  std::sort(eos_.begin(), eos_.end());
  eos_.erase(std::unique(eos_.begin(), eos_.end()), eos_.end());
  for (int32_t id : eos_) {
    if (id < 0 || static_cast<size_t>(id) >= bytes_.size()) {
      throw Error("vocabulary: end-of-sequence id " + std::to_string(id) + " is out of range");
    }
  }
  std::vector<int32_t> order;
  for (size_t i = 0; i < bytes_.size(); ++i) {
    if (bytes_[i].size() > 0xFFFF)
      throw Error("vocabulary: token " + std::to_string(i) + " is longer than 65535 bytes");
    if (!bytes_[i].empty()) order.push_back(static_cast<int32_t>(i));
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes_[a] != bytes_[b] ? bytes_[a] < bytes_[b] : a < b;
  });
  // Preorder over the sorted strings: a token's path shares the longest common prefix with
  // the previous token's path; `open` holds the node index of each depth of the current path.
  nodes_.push_back({0, 0, 0, 0, 0});
  std::vector<int32_t> open{0};
  std::string prev;
  for (int32_t id : order) {
    const std::string& s = bytes_[id];
    size_t common = 0;
    while (common < s.size() && common < prev.size() && s[common] == prev[common]) ++common;
    while (open.size() > common + 1) {
      nodes_[open.back()].end = static_cast<int32_t>(nodes_.size());
      open.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      const int32_t t = static_cast<int32_t>(trie_tokens_.size());
      nodes_.push_back({static_cast<uint8_t>(s[d]), static_cast<uint16_t>(d + 1), 0, t, t});
      open.push_back(static_cast<int32_t>(nodes_.size() - 1));
    }
    Node& leaf = nodes_[open.back()];
    if (leaf.tok_begin == leaf.tok_end)
      leaf.tok_begin = leaf.tok_end = static_cast<int32_t>(trie_tokens_.size());
    trie_tokens_.push_back(id);
    leaf.tok_end = static_cast<int32_t>(trie_tokens_.size());
    max_depth_ = std::max(max_depth_, s.size());
    prev = s;
  }
  while (!open.empty()) {
    nodes_[open.back()].end = static_cast<int32_t>(nodes_.size());
    open.pop_back();
  }
}

bool Vocabulary::is_eos(int32_t id) const {
  return std::binary_search(eos_.begin(), eos_.end(), id);
}

}  // namespace invar::grammar
