#include "grammar/grammar.h"

#include <algorithm>
#include <map>

#include "grammar/error.h"

namespace invar::grammar {

class Lowering {
 public:
  explicit Lowering(const Builder& b) : b_(b), lim_(b.limits()) {}

  Grammar run(RuleId root) {
    // Builder rules keep their ids; helpers are appended after them.
    for (size_t r = 0; r < b_.n_rules(); ++r) new_rule(b_.rule_name(static_cast<RuleId>(r)));
    std::vector<char> done(b_.n_rules(), 0);
    std::vector<RuleId> todo{root};
    done[root] = 1;
    while (!todo.empty()) {
      const RuleId r = todo.back();
      todo.pop_back();
      if (!b_.defined(r)) {
        throw Error("grammar: rule '" + b_.rule_name(r) + "' is used but never defined");
      }
      stem_ = b_.rule_name(r);
      alts_[r] = alternatives(b_.rule_body(r));
      for (RuleId c : pending_calls_) {
        if (c < static_cast<RuleId>(b_.n_rules()) && !done[c]) {
          done[c] = 1;
          todo.push_back(c);
        }
      }
      pending_calls_.clear();
    }
    Grammar g;
    g.root_ = root;
    g.limits_ = b_.limits();
    g.names_ = names_;
    for (size_t i = 0; i < b_.n_sets(); ++i) g.sets_.push_back(b_.set(static_cast<int32_t>(i)));
    g.alts_.resize(alts_.size());
    for (size_t r = 0; r < alts_.size(); ++r) {
      for (const auto& seq : alts_[r]) {
        g.alts_[r].push_back(static_cast<int32_t>(g.code_.size()));
        g.code_.insert(g.code_.end(), seq.begin(), seq.end());
        g.code_.push_back(Grammar::kEnd);
      }
    }
    check_left_recursion(g);
    check_productive(g);
    g.byte_classes_make();
    return g;
  }

 private:
  using Seq = std::vector<int32_t>;

  RuleId new_rule(const std::string& name) {
    if (alts_.size() >= lim_.max_rules) {
      throw LimitError("grammar: more than " + std::to_string(lim_.max_rules) +
                       " rules after lowering (max_rules)");
    }
    alts_.emplace_back();
    names_.push_back(name);
    return static_cast<RuleId>(alts_.size() - 1);
  }

  RuleId helper() { return new_rule(stem_ + "-" + std::to_string(alts_.size())); }

  void count(size_t n) {
    elements_ += n;
    if (elements_ > lim_.max_grammar_elements) {
      throw LimitError("grammar: more than " + std::to_string(lim_.max_grammar_elements) +
                       " elements after lowering (max_grammar_elements)");
    }
  }

  std::vector<Seq> alternatives(ExprId e) {
    std::vector<Seq> out;
    const auto& n = b_.node(e);
    if (n.op == Builder::Op::alt) {
      for (ExprId k : n.kids) {
        out.emplace_back();
        emit(k, out.back());
        count(out.back().size() + 1);
      }
    } else {
      out.emplace_back();
      emit(e, out.back());
      count(out.back().size() + 1);
    }
    return out;
  }

  static int32_t call(RuleId r) { return 2 * r + 1; }

  void emit(ExprId e, Seq& out) {
    const auto& n = b_.node(e);
    switch (n.op) {
      case Builder::Op::bytes:
        out.push_back(2 * n.a);
        break;
      case Builder::Op::ref:
        pending_calls_.push_back(n.a);
        out.push_back(call(n.a));
        break;
      case Builder::Op::empty:
        break;
      case Builder::Op::seq:
        for (ExprId k : n.kids) emit(k, out);
        break;
      case Builder::Op::alt:
        out.push_back(call(rule_for(e)));
        break;
      case Builder::Op::repeat: {
        const int32_t x = element(n.a);
        for (int64_t i = 0; i < n.min; ++i) {
          out.push_back(x);
          count(1);
        }
        if (n.max == kUnbounded) {
          out.push_back(call(star_rule(n.a, x)));
        } else if (n.max > n.min) {
          out.push_back(call(chain_rule(n.a, x, n.max - n.min)));
        }
        break;
      }
    }
  }

  // One element standing for expression e: the terminal or call itself, else a helper rule.
  int32_t element(ExprId e) {
    const auto& n = b_.node(e);
    if (n.op == Builder::Op::bytes) return 2 * n.a;
    if (n.op == Builder::Op::ref) {
      pending_calls_.push_back(n.a);
      return call(n.a);
    }
    return call(rule_for(e));
  }

  RuleId rule_for(ExprId e) {
    if (auto it = expr_rule_.find(e); it != expr_rule_.end()) return it->second;
    const RuleId r = helper();
    expr_rule_[e] = r;
    auto alts = alternatives(e);
    alts_[r] = std::move(alts);
    return r;
  }

  // R ::= x R | ε  (the call of R is a tail call: constant depth)
  RuleId star_rule(ExprId e, int32_t x) {
    const auto key = std::make_pair(e, int64_t{-1});
    if (auto it = chain_.find(key); it != chain_.end()) return it->second;
    const RuleId r = helper();
    chain_[key] = r;
    alts_[r] = {Seq{x, call(r)}, Seq{}};
    count(5);
    return r;
  }

  // R_k ::= x R_(k-1) | ε, R_1 ::= x | ε: between 0 and k copies of x, with no ambiguity.
  RuleId chain_rule(ExprId e, int32_t x, int64_t k) {
    RuleId prev = -1;
    for (int64_t j = 1; j <= k; ++j) {
      const auto key = std::make_pair(e, j);
      if (auto it = chain_.find(key); it != chain_.end()) {
        prev = it->second;
        continue;
      }
      const RuleId r = helper();
      chain_[key] = r;
      alts_[r] =
          prev < 0 ? std::vector<Seq>{Seq{x}, Seq{}} : std::vector<Seq>{Seq{x, call(prev)}, Seq{}};
      count(5);
      prev = r;
    }
    return prev;
  }

  // A rule that reaches itself before any byte through a call that leaves something behind on
  // the stack would push frames forever. Tail calls (the last element) push nothing, so a cycle
  // made only of them is harmless (the closure's visited set ends it).
  void check_left_recursion(const Grammar& g) {
    const size_t n = g.alts_.size();
    std::vector<char> nullable(n, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (int32_t p : g.alts_[r]) {
          bool all = true;
          for (int32_t i = p; !Grammar::is_end(g.code_[i]); ++i) {
            const int32_t c = g.code_[i];
            if (!Grammar::is_call(c) || !nullable[Grammar::rule_of(c)]) {
              all = false;
              break;
            }
          }
          if (all) {
            nullable[r] = 1;
            changed = true;
            break;
          }
        }
      }
    }
    // Edges r -> s (s can start r), flagged when s's call is not in tail position.
    struct Edge {
      RuleId to;
      bool pushes;
    };
    std::vector<std::vector<Edge>> edges(n);
    for (size_t r = 0; r < n; ++r) {
      for (int32_t p : g.alts_[r]) {
        for (int32_t i = p; !Grammar::is_end(g.code_[i]); ++i) {
          const int32_t c = g.code_[i];
          if (!Grammar::is_call(c)) break;
          edges[r].push_back({Grammar::rule_of(c), !Grammar::is_end(g.code_[i + 1])});
          if (!nullable[Grammar::rule_of(c)]) break;
        }
      }
    }
    // Tarjan's strongly connected components, iteratively; an SCC with a pushing edge inside
    // is left recursion.
    std::vector<int32_t> index(n, -1), low(n, 0), comp(n, -1);
    std::vector<char> on(n, 0);
    std::vector<RuleId> st;
    int32_t counter = 0, n_comp = 0;
    struct Frame {
      RuleId r;
      size_t next;
    };
    for (size_t s0 = 0; s0 < n; ++s0) {
      if (index[s0] >= 0) continue;
      std::vector<Frame> call_stack{{static_cast<RuleId>(s0), 0}};
      index[s0] = low[s0] = counter++;
      st.push_back(static_cast<RuleId>(s0));
      on[s0] = 1;
      while (!call_stack.empty()) {
        Frame& f = call_stack.back();
        if (f.next < edges[f.r].size()) {
          const RuleId t = edges[f.r][f.next++].to;
          if (index[t] < 0) {
            index[t] = low[t] = counter++;
            st.push_back(t);
            on[t] = 1;
            call_stack.push_back({t, 0});
          } else if (on[t]) {
            low[f.r] = std::min(low[f.r], index[t]);
          }
          continue;
        }
        const RuleId r = f.r;
        call_stack.pop_back();
        if (!call_stack.empty())
          low[call_stack.back().r] = std::min(low[call_stack.back().r], low[r]);
        if (low[r] == index[r]) {
          RuleId t;
          do {
            t = st.back();
            st.pop_back();
            on[t] = 0;
            comp[t] = n_comp;
          } while (t != r);
          ++n_comp;
        }
      }
    }
    for (size_t r = 0; r < n; ++r) {
      for (const Edge& e : edges[r]) {
        if (e.pushes && comp[e.to] == comp[r]) {
          throw Error("grammar: left recursion: rule '" + g.names_[r] +
                      "' can reach itself through '" + g.names_[e.to] +
                      "' before matching anything (rewrite it as a repetition)");
        }
      }
    }
  }

  // A grammar whose start rule derives no finite string would leave a matcher with nothing to
  // allow at its first token: refused here (e.g. a cycle of $refs with no content).
  void check_productive(const Grammar& g) {
    std::vector<char> productive(g.alts_.size(), 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < g.alts_.size(); ++r) {
        if (productive[r]) continue;
        for (int32_t p : g.alts_[r]) {
          bool all = true;
          for (int32_t i = p; !Grammar::is_end(g.code_[i]); ++i) {
            const int32_t c = g.code_[i];
            if (Grammar::is_call(c) ? !productive[Grammar::rule_of(c)] : g.sets_[c >> 1].empty()) {
              all = false;
              break;
            }
          }
          if (all) {
            productive[r] = 1;
            changed = true;
            break;
          }
        }
      }
    }
    if (!productive[g.root_]) {
      throw Error("grammar: the language is empty: rule '" + g.names_[g.root_] +
                  "' derives no string");
    }
  }

  const Builder& b_;
  const Limits& lim_;
  std::vector<std::vector<Seq>> alts_;
  std::vector<std::string> names_;
  std::vector<RuleId> pending_calls_;
  std::map<ExprId, RuleId> expr_rule_;
  std::map<std::pair<ExprId, int64_t>, RuleId> chain_;
  std::string stem_;
  size_t elements_ = 0;
};

Grammar lower(const Builder& b, RuleId root) {
  return Lowering(b).run(root);
}

// Partition refinement: each byte set the program uses splits every class into its members and
// the rest. O(distinct sets · 256).
void Grammar::byte_classes_make() {
  std::vector<char> used(sets_.size(), 0);
  for (int32_t c : code_)
    if (!is_end(c) && !is_call(c)) used[static_cast<size_t>(c >> 1)] = 1;
  std::array<int, 256> cls{};  // all bytes in class 0
  int n = 1;
  for (size_t i = 0; i < sets_.size(); ++i) {
    if (!used[i]) continue;
    // (old class, in set) → new class, numbered in byte order.
    std::vector<int> renum(static_cast<size_t>(2 * n), -1);
    int m = 0;
    for (int b = 0; b < 256; ++b) {
      int& r =
          renum[static_cast<size_t>(2 * cls[b] + (sets_[i].has(static_cast<uint8_t>(b)) ? 1 : 0))];
      if (r < 0) r = m++;
      cls[b] = r;
    }
    n = m;
    if (n == 256) break;
  }
  for (int b = 0; b < 256; ++b) byte_class_[b] = static_cast<uint8_t>(cls[b]);
  n_byte_classes_ = n;
}

size_t Grammar::size_bytes() const {
  // What the heap holds for it: capacities, each vector's and string's header, and an
  // allocator's overhead per block (16 bytes on glibc), so that the compile cache's byte budget
  // charges a grammar of many small rules for its rules, not only for its code.
  constexpr size_t kBlock = 16;
  size_t n = sizeof(Grammar) + code_.capacity() * sizeof(int32_t) +
             sets_.capacity() * sizeof(ByteSet) + alts_.capacity() * sizeof(alts_[0]) +
             names_.capacity() * sizeof(names_[0]) + 4 * kBlock;
  for (const auto& a : alts_) n += a.capacity() * sizeof(int32_t) + kBlock;
  for (const auto& s : names_)
    if (s.capacity() > 15) n += s.capacity() + 1 + kBlock;  // beyond the small-string buffer
  return n;
}

namespace {

std::string set_text(const ByteSet& s) {
  std::string out = "[";
  char buf[8];
  for (int b = 0; b < 256; ++b) {
    if (!s.has(static_cast<uint8_t>(b))) continue;
    int e = b;
    while (e + 1 < 256 && s.has(static_cast<uint8_t>(e + 1))) ++e;
    auto one = [&](int x) {
      if (x >= 0x21 && x < 0x7f && x != '\\' && x != ']' && x != '-' && x != '^') {
        out += static_cast<char>(x);
      } else {
        std::snprintf(buf, sizeof(buf), "\\x%02X", x);
        out += buf;
      }
    };
    one(b);
    if (e > b) {
      out += '-';
      one(e);
    }
    b = e;
  }
  return out + "]";
}

}  // namespace

std::string Grammar::dump() const {
  std::string out;
  for (size_t r = 0; r < alts_.size(); ++r) {
    out += names_[r] + " ::=";
    for (size_t a = 0; a < alts_[r].size(); ++a) {
      if (a) out += " |";
      for (int32_t i = alts_[r][a]; !is_end(code_[i]); ++i) {
        const int32_t c = code_[i];
        out += " " + (is_call(c) ? names_[rule_of(c)] : set_text(sets_[c >> 1]));
      }
      if (!is_end(code_[alts_[r][a]])) continue;
      out += " \"\"";
    }
    out += "\n";
  }
  return out;
}

}  // namespace invar::grammar
