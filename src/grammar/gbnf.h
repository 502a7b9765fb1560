// llama.cpp's GBNF (grammars/README.md there) as byte-level rules.
//
// Rules `name ::= alternatives` (names of letters, digits, '-' and '_'); literals "..." and
// classes [...] / [^...] with ranges over code points (matched as their UTF-8 bytes); `.` (any
// code point); groups; alternation `|`; * + ? {m} {m,} {m,n}; rule references; # comments.
// Escapes: \n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH. A newline ends a rule except inside
// a group or after `|` / `::=`. The start rule is `root`. Refused with Error: a syntax error (with
// its line and column), a rule defined twice or used but never defined, no root, token
// references (<...>), and left recursion (a rule reaching itself before any character through
// a non-tail call; `x ::= "a" | x` style tail cycles are accepted).
#pragma once

#include <string_view>

#include "grammar/builder.h"

namespace invar::grammar {

// Parses the GBNF text into b's rules and returns the root rule.
RuleId gbnf_parse(Builder& b, std::string_view text);

}  // namespace invar::grammar
