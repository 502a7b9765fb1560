// Regular expressions (the subset vLLM and outlines accept) as byte-level expressions.
//
// Supported: literals, escapes (\n \t \r \f \v \0 \xHH \uHHHH \\ and escaped punctuation),
// classes [...] with ranges and negation, `.` (any character but \n), \d \w \s and \D \W \S,
// groups (...), (?:...), (?P<name>...), (?<name>...), alternation, * + ? {m} {m,} {m,n} (a lazy
// `?` suffix denotes the same language), and anchors ^ \A at the start and $ \Z \z at the end.
// Refused with Error naming the feature: backreferences, lookahead/lookbehind, atomic groups,
// possessive quantifiers, inline flags, word boundaries, \p{...} classes, anchors elsewhere.
//
// Shorthand classes are ASCII: \d = [0-9], \w = [A-Za-z0-9_], \s = [ \t\n\r\f\v]. Python's re
// (the JSON Schema oracle) takes them as Unicode classes, so the ASCII ones are subsets, and the
// negated ones (\D \W \S, and any class negated with one inside) are restricted to ASCII so that
// they stay subsets too: every string the grammar allows matches in Python.
#pragma once

#include <string>
#include <string_view>

#include "grammar/builder.h"

namespace invar::grammar {

struct RegexOptions {
  // Characters are written as canonical JSON string content (json_char_expr): for `pattern`.
  bool json_string = false;
  // JSON Schema semantics (ECMA-262 / Python re.search): an end without its anchor may be
  // preceded / followed by any text. Off: the whole output must match (vLLM's guided_regex).
  bool search = false;
};

// `where` prefixes every error message (e.g. "regex" or "/properties/id/pattern").
ExprId regex_expr(Builder& b, std::string_view pattern, const RegexOptions& opt,
                  const std::string& where);

}  // namespace invar::grammar
