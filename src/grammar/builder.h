// The front ends' common target: an expression tree per named rule over byte sets, lowered by
// lower() into the flat Grammar the Matcher runs. Repetitions stay counted here ({m,n} is one
// node), so a front end never copies a subexpression; lowering shares it through one helper rule.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/limits.h"

namespace invar::grammar {

// 256 bits: the bytes a terminal accepts.
struct ByteSet {
  std::array<uint64_t, 4> w{};
  void add(uint8_t b) { w[b >> 6] |= uint64_t{1} << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) add(static_cast<uint8_t>(b));
  }
  bool has(uint8_t b) const { return (w[b >> 6] >> (b & 63)) & 1; }
  bool empty() const { return (w[0] | w[1] | w[2] | w[3]) == 0; }
  bool operator==(const ByteSet&) const = default;
};

using ExprId = int32_t;
using RuleId = int32_t;
inline constexpr int64_t kUnbounded = -1;  // Repeat max: no upper bound

class Builder {
 public:
  enum class Op : uint8_t { bytes, seq, alt, ref, repeat, empty };
  struct Node {
    Op op;
    int32_t a = 0;             // bytes: set index; ref: rule; repeat: child
    int64_t min = 0, max = 0;  // repeat bounds (max = kUnbounded: none)
    std::vector<ExprId> kids;  // seq, alt
  };

  explicit Builder(const Limits& limits) : limits_(limits) {}

  ExprId bytes(const ByteSet& s);
  ExprId byte(uint8_t b);
  ExprId literal(std::string_view s);  // the bytes of s in order
  // Exactly one of the strings, as a trie (shared prefixes matched once): one parse alive at a
  // time however many strings, where an alternation of literals would run one per string.
  // Each branching node is a rule whose calls are tail calls, so depth never grows.
  ExprId literal_set(const std::vector<std::string>& strings);
  ExprId seq(std::vector<ExprId> kids);
  ExprId alt(std::vector<ExprId> kids);  // no kids: the empty language
  ExprId ref(RuleId r);
  ExprId repeat(ExprId e, int64_t min, int64_t max);  // checks max_repeat

  // The states a regex / GBNF construct can expand to (Limits::max_repeat_states): an atom is
  // one per character, a sequence or an alternation the sum of its parts, a repetition its
  // bound (max, or min when unbounded, at least 1) times what it repeats. Saturating, so no
  // input overflows them.
  static int64_t states_add(int64_t a, int64_t b);
  // The states of `inner` repeated {min,max}; LimitError naming max_repeat_states and `what`
  // (the quantifier as written) past the limit. A bound of 1 (`?`, `*`, `+`) is not checked:
  // it copies nothing.
  int64_t states_repeat(int64_t inner, int64_t min, int64_t max, const std::string& where,
                        const std::string& what) const;
  ExprId empty();
  ExprId opt(ExprId e) { return repeat(e, 0, 1); }
  ExprId star(ExprId e) { return repeat(e, 0, kUnbounded); }
  ExprId plus(ExprId e) { return repeat(e, 1, kUnbounded); }

  // A named rule (created undefined on first mention, as a forward reference).
  RuleId rule(const std::string& name);
  // A new rule named after `stem`, never clashing with an existing name.
  RuleId fresh_rule(const std::string& stem);
  void define(RuleId r, ExprId body);
  bool defined(RuleId r) const { return rule_body_[r] >= 0; }

  const Node& node(ExprId e) const { return nodes_[e]; }
  const ByteSet& set(int32_t i) const { return sets_[i]; }
  size_t n_sets() const { return sets_.size(); }
  size_t n_rules() const { return rule_names_.size(); }
  const std::string& rule_name(RuleId r) const { return rule_names_[r]; }
  ExprId rule_body(RuleId r) const { return rule_body_[r]; }
  const Limits& limits() const { return limits_; }

 private:
  ExprId add(Node n);

  Limits limits_;
  std::vector<Node> nodes_;
  std::vector<ByteSet> sets_;
  std::vector<std::string> rule_names_;
  std::vector<ExprId> rule_body_;  // -1: not defined yet
  std::unordered_map<std::string, RuleId> rule_index_;
  std::unordered_map<std::string, int32_t> set_index_;  // dedupe of byte sets
};

}  // namespace invar::grammar
