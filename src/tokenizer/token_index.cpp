#include "tokenizer/token_index.h"

#include <cstring>

namespace invar {
namespace {

// Eight bytes at a time, multiply and fold (the splitmix64 constants); the last partial word is
// read zero-padded and the length goes into the seed, so "a" and "a\0" differ.
uint64_t text_hash(std::string_view s) {
  const char* p = s.data();
  size_t n = s.size();
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * 0x94d049bb133111ebull;
    h ^= h >> 29;
  }
  h = (h ^ (h >> 32)) * 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 29);
}

}  // namespace

TokenIndex::TokenIndex(const std::vector<std::string>& tokens) : tokens_(&tokens) {
  size_t cap = 16;
  while (cap < 2 * tokens.size()) cap <<= 1;
  slots_.resize(cap);  // zero pages: every slot empty
  mask_ = cap - 1;
  for (size_t id = 0; id < tokens.size(); ++id) {
    const uint64_t h = text_hash(tokens[id]);
    const auto tag = static_cast<uint32_t>(h >> 32);
    for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.id_plus == 0) {
        s = {tag, static_cast<uint32_t>(id + 1)};
        break;
      }
      if (s.tag == tag && tokens[s.id_plus - 1] == tokens[id]) {
        unique_ = false;  // the first id stays
        break;
      }
    }
  }
}

int32_t TokenIndex::find(std::string_view text) const {
  if (slots_.empty()) return -1;
  const uint64_t h = text_hash(text);
  const auto tag = static_cast<uint32_t>(h >> 32);
  for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.id_plus == 0) return -1;
    if (s.tag == tag && (*tokens_)[s.id_plus - 1] == text)
      return static_cast<int32_t>(s.id_plus - 1);
  }
}

}  // namespace invar
