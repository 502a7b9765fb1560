#include "grammar/gbnf.h"

#include <set>

#include "grammar/codepoints.h"
#include "grammar/error.h"

namespace invar::grammar {

namespace {

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

class GbnfParser {
 public:
  GbnfParser(Builder& b, std::string_view t) : b_(b), t_(t) {}

  RuleId run() {
    skip_space(true);
    while (pos_ < t_.size()) {
      const std::string name = parse_name();
      skip_space(false);
      if (t_.substr(pos_, 3) != "::=") fail("expected '::=' after rule name '" + name + "'");
      pos_ += 3;
      skip_space(true);
      const RuleId r = b_.rule(name);
      if (!defined_.insert(name).second) fail("rule '" + name + "' is defined twice");
      int64_t states = 0;
      b_.define(r, alternatives(0, states));
      if (pos_ < t_.size() && t_[pos_] != '\n' && t_[pos_] != '\r') fail("unexpected character");
      skip_space(true);
    }
    if (!defined_.contains("root")) throw Error("gbnf: no 'root' rule");
    return b_.rule("root");
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < t_.size(); ++i) {
      if (t_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw Error("gbnf: " + msg + " at line " + std::to_string(line) + ", column " +
                std::to_string(col));
  }

  // Spaces, tabs and comments; newlines too when `newlines` (inside groups, after | or ::=).
  void skip_space(bool newlines) {
    while (pos_ < t_.size()) {
      const char c = t_[pos_];
      if (c == ' ' || c == '\t') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < t_.size() && t_[pos_] != '\n') ++pos_;
      } else if (newlines && (c == '\n' || c == '\r')) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t s = pos_;
    while (pos_ < t_.size() && name_char(t_[pos_])) ++pos_;
    if (pos_ == s) fail("expected a rule name");
    return std::string(t_.substr(s, pos_ - s));
  }

  // `states`: what the parsed construct can expand to (Builder::states_repeat). A rule name
  // counts one: its own repetitions are checked where it is defined.
  ExprId alternatives(int depth, int64_t& states) {
    if (depth > b_.limits().max_nesting) {
      throw LimitError("gbnf: groups nested deeper than " +
                       std::to_string(b_.limits().max_nesting) + " (max_nesting)");
    }
    const bool nested = depth > 0;
    std::vector<ExprId> alts;
    states = 0;
    for (;;) {
      int64_t s = 0;
      alts.push_back(sequence(depth, nested, s));
      states = Builder::states_add(states, s);
      if (pos_ < t_.size() && t_[pos_] == '|') {
        ++pos_;
        skip_space(true);
        continue;
      }
      break;
    }
    return b_.alt(std::move(alts));
  }

  ExprId sequence(int depth, bool nested, int64_t& states) {
    std::vector<ExprId> seq;
    states = 1;  // an empty branch is one state
    while (pos_ < t_.size()) {
      const char c = t_[pos_];
      if (c == '|' || c == ')' || c == '\n' || c == '\r') break;
      int64_t s = 1;
      ExprId e = primary(depth, s);
      skip_space(nested);
      e = quantifiers(e, s, nested);
      states = seq.empty() ? s : Builder::states_add(states, s);
      seq.push_back(e);
    }
    if (seq.empty()) return b_.empty();
    return b_.seq(std::move(seq));
  }

  ExprId quantifiers(ExprId e, int64_t& states, bool nested) {
    while (pos_ < t_.size()) {
      const size_t start = pos_;
      const char c = t_[pos_];
      int64_t min, max;
      if (c == '*') {
        min = 0, max = kUnbounded, ++pos_;
      } else if (c == '+') {
        min = 1, max = kUnbounded, ++pos_;
      } else if (c == '?') {
        min = 0, max = 1, ++pos_;
      } else if (c == '{') {
        ++pos_;
        skip_space(nested);
        min = number();
        skip_space(nested);
        max = min;
        if (pos_ < t_.size() && t_[pos_] == ',') {
          ++pos_;
          skip_space(nested);
          max = (pos_ < t_.size() && t_[pos_] == '}') ? kUnbounded : number();
          skip_space(nested);
        }
        if (pos_ >= t_.size() || t_[pos_] != '}') fail("expected '}'");
        ++pos_;
      } else {
        break;
      }
      e = b_.repeat(e, min, max);
      states =
          b_.states_repeat(states, min, max, "gbnf", std::string(t_.substr(start, pos_ - start)));
      skip_space(nested);
    }
    return e;
  }

  int64_t number() {
    const size_t s = pos_;
    int64_t v = 0;
    while (pos_ < t_.size() && t_[pos_] >= '0' && t_[pos_] <= '9') {
      v = std::min<int64_t>(v * 10 + (t_[pos_] - '0'), int64_t{1} << 40);
      ++pos_;
    }
    if (pos_ == s) fail("expected a number");
    return v;
  }

  uint32_t hex(int n) {
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      if (pos_ >= t_.size() || !std::isxdigit(static_cast<unsigned char>(t_[pos_]))) {
        fail("expected " + std::to_string(n) + " hex digits");
      }
      const char c = t_[pos_++];
      v = v * 16 + (c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    if (v > kMaxCodepoint || (v >= 0xD800 && v <= 0xDFFF))
      fail("escape is not a Unicode scalar value");
    return v;
  }

  // One code point of a literal or class, escapes decoded.
  uint32_t char_at() {
    if (pos_ >= t_.size()) fail("unexpected end of grammar");
    if (t_[pos_] != '\\') return decode_utf8(t_, pos_, "gbnf");
    ++pos_;
    if (pos_ >= t_.size()) fail("unexpected end after '\\'");
    const char c = t_[pos_++];
    switch (c) {
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
        return static_cast<uint8_t>(c);
      case 'x':
        return hex(2);
      case 'u':
        return hex(4);
      case 'U':
        return hex(8);
      default:
        --pos_;
        fail(std::string("unknown escape \\") + c);
    }
  }

  ExprId primary(int depth, int64_t& states) {
    const char c = t_[pos_];
    if (c == '"') {
      ++pos_;
      std::string bytes;
      while (true) {
        if (pos_ >= t_.size() || t_[pos_] == '\n') fail("unterminated string literal");
        if (t_[pos_] == '"') break;
        append_utf8(bytes, char_at());
      }
      ++pos_;
      states = std::max<int64_t>(1, static_cast<int64_t>(bytes.size()));
      return bytes.empty() ? b_.empty() : b_.literal(bytes);
    }
    if (c == '[') {
      ++pos_;
      bool negate = false;
      if (pos_ < t_.size() && t_[pos_] == '^') {
        negate = true;
        ++pos_;
      }
      CodepointSet s;
      while (true) {
        if (pos_ >= t_.size()) fail("unterminated character class");
        if (t_[pos_] == ']') break;
        const uint32_t lo = char_at();
        uint32_t hi = lo;
        if (pos_ + 1 < t_.size() && t_[pos_] == '-' && t_[pos_ + 1] != ']') {
          ++pos_;
          hi = char_at();
          if (hi < lo) fail("range out of order in a character class");
        }
        s.add(lo, hi);
      }
      ++pos_;
      return utf8_expr(b_, negate ? s.complement() : s);
    }
    if (c == '.') {
      ++pos_;
      return utf8_expr(b_, CodepointSet::all());
    }
    if (c == '(') {
      ++pos_;
      skip_space(true);
      ExprId e = alternatives(depth + 1, states);
      if (pos_ >= t_.size() || t_[pos_] != ')') fail("expected ')'");
      ++pos_;
      return e;
    }
    if (c == '<') fail("token references <...> are not supported");
    if (name_char(c)) return b_.ref(b_.rule(parse_name()));
    fail(std::string("unexpected character '") + c + "'");
  }

  Builder& b_;
  std::string_view t_;
  size_t pos_ = 0;
  std::set<std::string> defined_;
};

}  // namespace

RuleId gbnf_parse(Builder& b, std::string_view text) {
  return GbnfParser(b, text).run();
}

}  // namespace invar::grammar
