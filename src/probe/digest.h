// The three SHA-256 digests of one completion (DESIGN.md §5; the one definition, documented in
// docs/digest.md and used by `invar run` too). Text equality is never evidence: the order
// digest sees a runner-up moving even when the chosen token stays.
//
// Byte stream hashed per generated token, in generation order:
//   key(chosen) logprob(chosen) u32 k { key(cand) logprob(cand) } * k
// key(c) = 'I' + i64 id (little-endian) when the server reported ids, else 'T' + u32 length +
// token bytes; logprob = the IEEE-754 binary64 bits (little-endian) of the JSON number received.
//   order:  candidates in the server's order.
//   sorted: candidates sorted by key (ids ascending, then token bytes): a reshuffle of tied
//           candidates changes `order` but not `sorted`.
//   text:   the completion text alone.
#pragma once

#include <string>
#include <string_view>

#include "core/sha256.h"
#include "probe/completion.h"

namespace invar::probe {

struct Digests {
  std::string order;   // hex SHA-256, candidates in server order
  std::string sorted;  // hex SHA-256, candidates sorted by token key
  std::string text;    // hex SHA-256 of the text
};

Digests completion_digests(const Completion& c);

// The identity of a candidate used for matching across runs: "#<id>" or "t:<text>".
std::string candidate_key(const Candidate& c);

}  // namespace invar::probe
