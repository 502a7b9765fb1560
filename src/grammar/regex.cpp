#include "grammar/regex.h"

#include "grammar/codepoints.h"
#include "grammar/error.h"

namespace invar::grammar {

namespace {

CodepointSet digit_set() {
  CodepointSet s;
  s.add('0', '9');
  return s;
}
CodepointSet word_set() {
  CodepointSet s;
  s.add('0', '9');
  s.add('A', 'Z');
  s.add('a', 'z');
  s.add('_');
  return s;
}
CodepointSet space_set() {
  CodepointSet s;
  s.add(' ');
  s.add('\t', '\r');  // \t \n \v \f \r
  return s;
}

class RegexParser {
 public:
  RegexParser(Builder& b, std::string_view p, const RegexOptions& opt, const std::string& where)
      : b_(b), p_(p), opt_(opt), where_(where) {}

  ExprId run() {
    bool anchored_start = false, anchored_end = false;
    if (eat_anchor_start()) anchored_start = true;
    // A trailing $ (not escaped) anchors the end.
    size_t end = p_.size();
    if (end > pos_ && p_[end - 1] == '$' && !escaped_at(end - 1)) {
      anchored_end = true;
      --end;
    } else if (end >= pos_ + 2 && p_[end - 2] == '\\' &&
               (p_[end - 1] == 'Z' || p_[end - 1] == 'z') && !escaped_at(end - 2)) {
      anchored_end = true;
      end -= 2;
    }
    limit_ = end;
    int64_t states = 0;
    bool top_alt = false;
    ExprId e = alternation(0, states, &top_alt);
    if (pos_ != limit_) fail("unbalanced ')'");
    if (!opt_.search) return e;
    if (top_alt && (anchored_start || anchored_end)) {
      fail(
          "an anchor applies to one branch of a top-level '|' only; wrap the alternation in a "
          "group");
    }
    std::vector<ExprId> seq;
    if (!anchored_start) seq.push_back(any_text());
    seq.push_back(e);
    if (!anchored_end) seq.push_back(any_text());
    return b_.seq(std::move(seq));
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const {
    throw Error(where_ + ": " + msg + " (at offset " + std::to_string(pos_) + ")");
  }

  bool escaped_at(size_t i) const {
    size_t n = 0;
    while (i > n && p_[i - 1 - n] == '\\') ++n;
    return n % 2 == 1;
  }

  bool eat_anchor_start() {
    if (p_.substr(pos_, 1) == "^") {
      ++pos_;
      return true;
    }
    if (p_.substr(pos_, 2) == "\\A") {
      pos_ += 2;
      return true;
    }
    return false;
  }

  bool at_end() const { return pos_ >= limit_; }
  char peek() const { return p_[pos_]; }

  ExprId chars(const CodepointSet& s) {
    return opt_.json_string ? json_char_expr(b_, s) : utf8_expr(b_, s);
  }

  ExprId any_text() { return b_.star(chars(CodepointSet::all())); }

  // `states`: what the parsed construct can expand to (Builder::states_repeat).
  ExprId alternation(int depth, int64_t& states, bool* top_alt) {
    if (depth > b_.limits().max_nesting) {
      throw LimitError(where_ + ": groups nested deeper than " +
                       std::to_string(b_.limits().max_nesting) + " (max_nesting)");
    }
    std::vector<ExprId> alts;
    states = 0;
    for (;;) {
      int64_t s = 0;
      alts.push_back(concat(depth, s));
      states = Builder::states_add(states, s);
      if (!at_end() && peek() == '|') {
        ++pos_;
        if (top_alt) *top_alt = true;
        continue;
      }
      break;
    }
    return b_.alt(std::move(alts));
  }

  ExprId concat(int depth, int64_t& states) {
    std::vector<ExprId> seq;
    states = 1;  // an empty branch is one state
    while (!at_end() && peek() != '|' && peek() != ')') {
      int64_t s = 1;
      ExprId a = atom(depth, s);
      a = quantifiers(a, s);
      states = seq.empty() ? s : Builder::states_add(states, s);
      seq.push_back(a);
    }
    if (seq.empty()) return b_.empty();
    return b_.seq(std::move(seq));
  }

  // Parses {m}, {m,}, {m,n} at pos_; false (pos_ unchanged) when the brace is a literal.
  bool counted(int64_t& min, int64_t& max) {
    size_t i = pos_ + 1;
    auto number = [&](int64_t& v) {
      const size_t s = i;
      v = 0;
      while (i < limit_ && p_[i] >= '0' && p_[i] <= '9') {
        v = std::min<int64_t>(v * 10 + (p_[i] - '0'), int64_t{1} << 40);
        ++i;
      }
      return i > s;
    };
    if (!number(min)) return false;
    max = min;
    if (i < limit_ && p_[i] == ',') {
      ++i;
      if (!number(max)) max = kUnbounded;
    }
    if (i >= limit_ || p_[i] != '}') return false;
    pos_ = i + 1;
    return true;
  }

  ExprId quantifiers(ExprId a, int64_t& states) {
    while (!at_end()) {
      const size_t start = pos_;
      const char c = peek();
      int64_t min, max;
      if (c == '*') {
        min = 0, max = kUnbounded, ++pos_;
      } else if (c == '+') {
        min = 1, max = kUnbounded, ++pos_;
      } else if (c == '?') {
        min = 0, max = 1, ++pos_;
      } else if (c == '{' && counted(min, max)) {
      } else {
        break;
      }
      if (!at_end() && peek() == '?') {
        ++pos_;  // lazy: same language
      } else if (!at_end() && peek() == '+') {
        fail("possessive quantifiers are not supported");
      }
      a = b_.repeat(a, min, max);
      states =
          b_.states_repeat(states, min, max, where_, std::string(p_.substr(start, pos_ - start)));
    }
    return a;
  }

  uint32_t hex(int n) {
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      if (at_end() || !std::isxdigit(static_cast<unsigned char>(peek()))) fail("bad hex escape");
      const char c = peek();
      v = v * 16 + (c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
      ++pos_;
    }
    return v;
  }

  // After a backslash: a single code point (returns true, cp set) or a class (set filled).
  bool escape(uint32_t& cp, CodepointSet& set, bool in_class) {
    if (at_end()) fail("pattern ends with a backslash");
    const char c = peek();
    ++pos_;
    switch (c) {
      case 'd':
        set = digit_set();
        return false;
      case 'w':
        set = word_set();
        return false;
      case 's':
        set = space_set();
        return false;
      case 'D':
        set = CodepointSet::ascii().intersect(digit_set().complement());
        return false;
      case 'W':
        set = CodepointSet::ascii().intersect(word_set().complement());
        return false;
      case 'S':
        set = CodepointSet::ascii().intersect(space_set().complement());
        return false;
      case 'n':
        cp = '\n';
        return true;
      case 't':
        cp = '\t';
        return true;
      case 'r':
        cp = '\r';
        return true;
      case 'f':
        cp = '\f';
        return true;
      case 'v':
        cp = '\v';
        return true;
      case '0':
        cp = 0;
        return true;
      case 'x':
        cp = hex(2);
        return true;
      case 'u':
        cp = hex(4);
        return true;
      case 'b':
        if (in_class) {
          cp = '\b';
          return true;
        }
        --pos_;
        fail("word boundaries (\\b) are not supported");
      case 'B':
        --pos_;
        fail("word boundaries (\\B) are not supported");
      case 'A':
      case 'Z':
      case 'z':
        --pos_;
        fail(std::string("the anchor \\") + c + " is supported only at the pattern's ends");
      case 'p':
      case 'P':
        --pos_;
        fail("Unicode property classes (\\p{...}) are not supported");
      case 'k':
        --pos_;
        fail("backreferences (\\k<name>) are not supported");
      default:
        break;
    }
    if (c >= '1' && c <= '9') {
      --pos_;
      fail("backreferences (\\" + std::string(1, c) + ") are not supported");
    }
    if (std::isalnum(static_cast<unsigned char>(c))) {
      --pos_;
      fail(std::string("unknown escape \\") + c);
    }
    --pos_;
    cp = decode_utf8(p_, pos_, where_.c_str());
    return true;
  }

  ExprId atom(int depth, int64_t& states) {
    const char c = peek();
    if (c == '(') return group(depth, states);
    if (c == '[') return char_class();
    if (c == '.') {
      ++pos_;
      CodepointSet s = CodepointSet::all();
      CodepointSet nl;
      nl.add('\n');
      return chars(s.intersect(nl.complement()));
    }
    if (c == '^' || c == '$')
      fail(std::string("the anchor ") + c + " is supported only at the pattern's ends");
    if (c == '*' || c == '+' || c == '?') fail(std::string("nothing to repeat before '") + c + "'");
    CodepointSet s;
    if (c == '\\') {
      ++pos_;
      uint32_t cp;
      if (escape(cp, s, false)) s.add(cp);
      return chars(s);
    }
    s.add(decode_utf8(p_, pos_, where_.c_str()));
    return chars(s);
  }

  ExprId group(int depth, int64_t& states) {
    ++pos_;  // (
    if (!at_end() && peek() == '?') {
      const std::string_view rest = p_.substr(pos_, limit_ - pos_);
      if (rest.starts_with("?:")) {
        pos_ += 2;
      } else if (rest.starts_with("?P<") ||
                 (rest.starts_with("?<") && !rest.starts_with("?<=") && !rest.starts_with("?<!"))) {
        const size_t close = p_.find('>', pos_);
        if (close == std::string_view::npos || close >= limit_) fail("unterminated group name");
        pos_ = close + 1;
      } else if (rest.starts_with("?=") || rest.starts_with("?!")) {
        fail("lookahead (?= / ?!) is not supported");
      } else if (rest.starts_with("?<=") || rest.starts_with("?<!")) {
        fail("lookbehind (?<= / ?<!) is not supported");
      } else if (rest.starts_with("?P=")) {
        fail("backreferences (?P=name) are not supported");
      } else if (rest.starts_with("?>")) {
        fail("atomic groups (?>...) are not supported");
      } else if (rest.starts_with("?#")) {
        fail("comments (?#...) are not supported");
      } else {
        fail("inline flags and other (?...) groups are not supported");
      }
    }
    ExprId e = alternation(depth + 1, states, nullptr);
    if (at_end() || peek() != ')') fail("missing ')'");
    ++pos_;
    return e;
  }

  ExprId char_class() {
    ++pos_;  // [
    bool negate = false;
    if (!at_end() && peek() == '^') {
      negate = true;
      ++pos_;
    }
    CodepointSet s;
    bool has_shorthand = false;
    bool first = true;
    while (true) {
      if (at_end()) fail("missing ']'");
      if (peek() == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      if (p_.substr(pos_, 2) == "[:") fail("POSIX classes [:name:] are not supported");
      uint32_t lo;
      if (peek() == '\\') {
        ++pos_;
        CodepointSet sh;
        if (!escape(lo, sh, true)) {
          s.add(sh);
          has_shorthand = true;
          continue;
        }
      } else {
        lo = decode_utf8(p_, pos_, where_.c_str());
      }
      uint32_t hi = lo;
      if (pos_ + 1 < limit_ && peek() == '-' && p_[pos_ + 1] != ']') {
        ++pos_;
        if (peek() == '\\') {
          ++pos_;
          CodepointSet sh;
          if (!escape(hi, sh, true)) fail("a class shorthand cannot end a range");
        } else {
          hi = decode_utf8(p_, pos_, where_.c_str());
        }
        if (hi < lo) fail("range out of order in a character class");
      }
      s.add(lo, hi);
    }
    if (negate) {
      s = s.complement();
      // Python's shorthand classes are Unicode-wide: outside ASCII the complement of ours is
      // not a subset of Python's, so keep it inside ASCII.
      if (has_shorthand) s = s.intersect(CodepointSet::ascii());
    }
    return chars(s);
  }

  Builder& b_;
  std::string_view p_;
  RegexOptions opt_;
  std::string where_;
  size_t pos_ = 0;
  size_t limit_ = 0;
};

}  // namespace

ExprId regex_expr(Builder& b, std::string_view pattern, const RegexOptions& opt,
                  const std::string& where) {
  return RegexParser(b, pattern, opt, where).run();
}

}  // namespace invar::grammar
