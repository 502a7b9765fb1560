// Sets of Unicode code points (scalar values: U+0000..U+10FFFF without the surrogates) and their
// translation to byte-level expressions: a character class becomes the UTF-8 byte sequences of
// its members, and a JSON string character becomes its one canonical encoding inside quotes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grammar/builder.h"

namespace invar::grammar {

inline constexpr uint32_t kMaxCodepoint = 0x10FFFF;

class CodepointSet {
 public:
  void add(uint32_t cp) { add(cp, cp); }
  void add(uint32_t lo, uint32_t hi);  // inclusive; surrogates are dropped
  void add(const CodepointSet& o);
  CodepointSet complement() const;  // within the scalar values
  CodepointSet intersect(const CodepointSet& o) const;
  bool contains(uint32_t cp) const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<std::pair<uint32_t, uint32_t>>& ranges() const { return ranges_; }

  static CodepointSet all();
  static CodepointSet ascii();

 private:
  void normalize();
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;  // sorted, disjoint, not adjacent
};

void append_utf8(std::string& out, uint32_t cp);

// Decodes one UTF-8 scalar at s[i], advancing i; throws Error (naming `what` and the offset)
// on ill-formed input.
uint32_t decode_utf8(std::string_view s, size_t& i, const char* what);

// One code point of the set, as its UTF-8 bytes. The empty set gives the empty language.
ExprId utf8_expr(Builder& b, const CodepointSet& s);

// One code point of the set as it appears inside a JSON string in invar's canonical form: raw
// UTF-8 except '"' -> \" , '\' -> \\ , the control characters U+0000..U+001F as \b \f \n \r \t
// or \u00xx (lowercase hex, as nlohmann::json and Python's json.dumps write them).
ExprId json_char_expr(Builder& b, const CodepointSet& s);

// The canonical JSON string content of UTF-8 text s (no quotes), the form json_char_expr makes.
std::string json_escape(std::string_view s);

}  // namespace invar::grammar
