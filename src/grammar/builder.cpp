#include "grammar/builder.h"

#include <algorithm>
#include <cstring>

#include "grammar/error.h"

namespace invar::grammar {

ExprId Builder::add(Node n) {
  if (nodes_.size() >= limits_.max_expr_nodes) {
    throw LimitError("grammar: more than " + std::to_string(limits_.max_expr_nodes) +
                     " expression nodes (max_expr_nodes)");
  }
  nodes_.push_back(std::move(n));
  return static_cast<ExprId>(nodes_.size() - 1);
}

ExprId Builder::bytes(const ByteSet& s) {
  std::string key(sizeof(s.w), '\0');
  std::memcpy(key.data(), s.w.data(), sizeof(s.w));
  auto [it, inserted] = set_index_.try_emplace(key, static_cast<int32_t>(sets_.size()));
  if (inserted) sets_.push_back(s);
  return add(Node{Op::bytes, it->second, 0, 0, {}});
}

ExprId Builder::byte(uint8_t b) {
  ByteSet s;
  s.add(b);
  return bytes(s);
}

ExprId Builder::literal(std::string_view s) {
  if (s.size() == 1) return byte(static_cast<uint8_t>(s[0]));
  std::vector<ExprId> kids;
  kids.reserve(s.size());
  for (char c : s) kids.push_back(byte(static_cast<uint8_t>(c)));
  return seq(std::move(kids));
}

ExprId Builder::literal_set(const std::vector<std::string>& strings) {
  struct TrieNode {
    std::vector<std::pair<uint8_t, int32_t>> kids;  // sorted by byte
    bool terminal = false;
  };
  std::vector<TrieNode> t(1);
  for (const auto& s : strings) {
    int32_t cur = 0;
    for (char c : s) {
      const uint8_t b = static_cast<uint8_t>(c);
      auto& kids = t[cur].kids;
      auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(b, int32_t{-1}));
      if (it == kids.end() || it->first != b) {
        const int32_t id = static_cast<int32_t>(t.size());
        it = kids.insert(it, {b, id});
        t.emplace_back();
      }
      cur = it->second;
    }
    t[cur].terminal = true;
  }
  // Bottom-up (children are created after their parents): a node with one child and no end
  // extends its child's literal; any other node becomes a rule.
  std::vector<ExprId> expr(t.size(), -1);
  std::vector<std::string> chain(t.size());  // bytes leading from the node to expr's start
  for (size_t i = t.size(); i-- > 0;) {
    const TrieNode& n = t[i];
    if (n.kids.size() == 1 && !n.terminal) {
      const auto [b, kid] = n.kids[0];
      chain[i] = static_cast<char>(b) + chain[kid];
      chain[kid].clear();
      chain[kid].shrink_to_fit();
      expr[i] = expr[kid];
      continue;
    }
    std::vector<ExprId> alts;
    for (const auto& [b, kid] : n.kids) {
      std::string lit = static_cast<char>(b) + chain[kid];
      chain[kid].clear();
      chain[kid].shrink_to_fit();
      alts.push_back(expr[kid] < 0 ? literal(lit) : seq({literal(lit), expr[kid]}));
    }
    if (n.terminal) alts.push_back(empty());
    if (n.kids.empty()) {
      expr[i] = -1;  // a leaf: nothing after the chain
      continue;
    }
    const RuleId r = fresh_rule("literals");
    define(r, alt(std::move(alts)));
    expr[i] = ref(r);
  }
  if (expr[0] < 0) return chain[0].empty() ? empty() : literal(chain[0]);
  return chain[0].empty() ? expr[0] : seq({literal(chain[0]), expr[0]});
}

ExprId Builder::seq(std::vector<ExprId> kids) {
  if (kids.size() == 1) return kids[0];
  Node n{Op::seq, 0, 0, 0, {}};
  n.kids = std::move(kids);
  return add(std::move(n));
}

ExprId Builder::alt(std::vector<ExprId> kids) {
  if (kids.size() == 1) return kids[0];
  Node n{Op::alt, 0, 0, 0, {}};
  n.kids = std::move(kids);
  return add(std::move(n));
}

ExprId Builder::ref(RuleId r) {
  return add(Node{Op::ref, r, 0, 0, {}});
}

namespace {
constexpr int64_t kStatesCap = int64_t{1} << 45;  // far above any limit; keeps products in range
}  // namespace

int64_t Builder::states_add(int64_t a, int64_t b) {
  return std::min(kStatesCap, a + b);
}

int64_t Builder::states_repeat(int64_t inner, int64_t min, int64_t max, const std::string& where,
                               const std::string& what) const {
  const int64_t bound = std::clamp<int64_t>(max == kUnbounded ? min : max, 1, limits_.max_repeat);
  const int64_t states = std::min(kStatesCap, inner * bound);
  if (bound > 1 && states > limits_.max_repeat_states) {
    throw LimitError(where + ": " + what + " repeats " + std::to_string(inner) + " states " +
                     std::to_string(bound) + " times (" + std::to_string(states) +
                     " states), more than " + std::to_string(limits_.max_repeat_states) +
                     " (max_repeat_states): nested counted repetitions multiply");
  }
  return states;
}

ExprId Builder::repeat(ExprId e, int64_t min, int64_t max) {
  const int64_t bound = max == kUnbounded ? min : max;
  if (min < 0 || (max != kUnbounded && max < min)) {
    throw Error("grammar: repetition {" + std::to_string(min) + "," + std::to_string(max) +
                "} has its bounds out of order");
  }
  if (bound > limits_.max_repeat) {
    throw LimitError("grammar: repetition bound " + std::to_string(bound) + " is above " +
                     std::to_string(limits_.max_repeat) + " (max_repeat)");
  }
  if (min == 1 && max == 1) return e;
  Node n{Op::repeat, e, 0, 0, {}};
  n.min = min;
  n.max = max;
  return add(std::move(n));
}

ExprId Builder::empty() {
  return add(Node{Op::empty, 0, 0, 0, {}});
}

RuleId Builder::rule(const std::string& name) {
  auto [it, inserted] = rule_index_.try_emplace(name, static_cast<RuleId>(rule_names_.size()));
  if (inserted) {
    if (rule_names_.size() >= limits_.max_rules) {
      throw LimitError("grammar: more than " + std::to_string(limits_.max_rules) +
                       " rules (max_rules)");
    }
    rule_names_.push_back(name);
    rule_body_.push_back(-1);
  }
  return it->second;
}

RuleId Builder::fresh_rule(const std::string& stem) {
  for (size_t i = rule_names_.size();; ++i) {
    const std::string name = stem + "-" + std::to_string(i);
    if (!rule_index_.contains(name)) return rule(name);
  }
}

void Builder::define(RuleId r, ExprId body) {
  rule_body_[r] = body;
}

}  // namespace invar::grammar
