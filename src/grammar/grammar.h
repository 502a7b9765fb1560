// The one representation every front end compiles to: a context-free grammar over bytes,
// lowered to a flat program the Matcher runs as a pushdown automaton.
//
// code[] holds each alternative of each rule as a run of elements ending in kEnd. An element is
// a terminal (even: 2 * byte-set index, matches one byte of the set) or a call (odd:
// 2 * rule + 1). A matcher position is an index into code[]; a stack frame holds the position to
// resume at when the called rule ends. A call that is the last element of its alternative is a
// tail call (no frame), so right recursion and `x*` loops run in constant stack depth.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "grammar/builder.h"

namespace invar::grammar {

class Grammar {
 public:
  static constexpr int32_t kEnd = -1;

  static bool is_end(int32_t c) { return c < 0; }
  static bool is_call(int32_t c) { return c >= 0 && (c & 1); }
  static int32_t rule_of(int32_t c) { return c >> 1; }

  // True when the terminal at code position pos accepts byte b.
  bool terminal_has(int32_t c, uint8_t b) const { return sets_[c >> 1].has(b); }
  // Bytes every terminal treats alike share a class: a matcher step depends on the byte only
  // through its class, so the Matcher memoises one step per (state, class). Classes are
  // numbered 0 .. n_byte_classes() - 1 in order of their smallest byte.
  uint8_t byte_class(uint8_t b) const { return byte_class_[b]; }
  int n_byte_classes() const { return n_byte_classes_; }

  const std::vector<int32_t>& code() const { return code_; }
  const std::vector<int32_t>& alternatives(RuleId r) const { return alts_[r]; }  // start positions
  RuleId root() const { return root_; }
  size_t n_rules() const { return alts_.size(); }
  const std::string& rule_name(RuleId r) const { return names_[r]; }
  size_t size_bytes() const;  // heap the grammar holds (estimated): the compile cache charges it
  // The limits it was compiled under; the engine's matchers of it run under them too, so a
  // test can lower a run-time bound (max_stacks_per_state) for one grammar. compile_cached
  // compiles under the defaults.
  const Limits& limits() const { return limits_; }

  // The program as GBNF-like text (one line per rule; byte sets as [..] of bytes), for tests
  // and error reports.
  std::string dump() const;

 private:
  friend class Lowering;
  void byte_classes_make();
  std::vector<int32_t> code_;
  std::array<uint8_t, 256> byte_class_{};
  int n_byte_classes_ = 1;
  std::vector<ByteSet> sets_;
  std::vector<std::vector<int32_t>> alts_;
  std::vector<std::string> names_;
  RuleId root_ = 0;
  Limits limits_;
};

// Lowers the builder's rules reachable from `root` into a Grammar. Throws Error for a rule used
// but never defined and for left recursion (a rule that can reach itself, before consuming a
// byte, through a call that is not a tail call: the stack would grow without end); LimitError
// past max_grammar_elements / max_rules.
Grammar lower(const Builder& b, RuleId root);

}  // namespace invar::grammar
