// Token text -> id over a vocabulary that is built once and then only read. A vocabulary of
// 150 000 tokens and as many merges costs about half a million lookups at start-up, each one a
// few cache misses in a node-based hash map; here a lookup touches one 8-byte slot of a flat
// table (open addressing, linear probing) and, when the slot's 32-bit tag matches, the token's
// text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/zero_pages.h"

namespace invar {

class TokenIndex {
 public:
  TokenIndex() = default;
  // Indexes tokens[0..n); a text that occurs twice keeps its first id. `tokens` must outlive
  // the index and stay unchanged.
  explicit TokenIndex(const std::vector<std::string>& tokens);
  int32_t find(std::string_view text) const;  // -1 if absent
  // No text occurs twice: then a token whose text equals T is the id find(T) gives.
  bool unique() const { return unique_; }

 private:
  struct Slot {
    uint32_t tag;      // high half of the text's hash
    uint32_t id_plus;  // id + 1; 0: empty
  };
  const std::vector<std::string>* tokens_ = nullptr;
  ZeroedVector<Slot> slots_;  // [capacity], a power of two at least twice the tokens
  uint64_t mask_ = 0;
  bool unique_ = true;
};

}  // namespace invar
