#include "probe/digest.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace invar::probe {
namespace {

void put_u32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; i++) s.push_back(char((v >> (8 * i)) & 0xff));
}

void put_u64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; i++) s.push_back(char((v >> (8 * i)) & 0xff));
}

void put_candidate(std::string& s, const Candidate& c) {
  if (c.id >= 0) {
    s.push_back('I');
    put_u64(s, uint64_t(c.id));
  } else {
    s.push_back('T');
    put_u32(s, uint32_t(c.token.size()));
    s += c.token;
  }
  uint64_t bits;
  std::memcpy(&bits, &c.logprob, sizeof bits);
  put_u64(s, bits);
}

bool key_less(const Candidate& a, const Candidate& b) {
  const bool ai = a.id >= 0, bi = b.id >= 0;
  if (ai != bi) return ai;  // ids first
  if (ai) return a.id < b.id;
  return a.token < b.token;
}

std::string stream(const Completion& c, bool sorted) {
  std::string s;
  std::vector<Candidate> top;
  for (const auto& t : c.tokens) {
    put_candidate(s, t.chosen);
    top = t.top;
    if (sorted) std::stable_sort(top.begin(), top.end(), key_less);
    put_u32(s, uint32_t(top.size()));
    for (const auto& k : top) put_candidate(s, k);
  }
  return s;
}

}  // namespace

Digests completion_digests(const Completion& c) {
  return {sha256_hex(stream(c, false)), sha256_hex(stream(c, true)), sha256_hex(c.text)};
}

std::string candidate_key(const Candidate& c) {
  return c.id >= 0 ? "#" + std::to_string(c.id) : "t:" + c.token;
}

}  // namespace invar::probe
