#include "chat/lexer.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "chat/py_string.h"
#include "chat/template_error.h"

namespace invar::chat {
namespace {

// Python's `\s` at pos: the byte length of the whitespace code point there, 0 if none.
size_t space_len(const std::string& s, size_t pos) {
  if (pos >= s.size()) return 0;
  const unsigned char c = static_cast<unsigned char>(s[pos]);
  if (c < 0x80) return py_isspace(c) ? 1 : 0;
  const size_t n = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  if (pos + n > s.size()) return 0;
  const std::u32string u = utf8_decode(std::string_view(s).substr(pos, n));
  return u.size() == 1 && py_isspace(u[0]) ? n : 0;
}

size_t skip_spaces(const std::string& s, size_t pos) {
  while (size_t n = space_len(s, pos)) pos += n;
  return pos;
}

bool all_spaces(const std::string& s, size_t from) {
  return from < s.size() && skip_spaces(s, from) == s.size();
}

bool starts(const std::string& s, size_t pos, const char* lit) {
  return s.compare(pos, std::strlen(lit), lit) == 0;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}

class Lexer {
 public:
  Lexer(std::string src, const LexOptions& opt) : src_(std::move(src)), opt_(opt) {
    line_starts_.push_back(0);
    for (size_t k = 0; k < src_.size(); ++k) {
      if (src_[k] == '\n') line_starts_.push_back(k + 1);
    }
  }

  std::vector<Token> run() {
    size_t pos = 0;
    while (pos < src_.size()) pos = root(pos);
    push(Tok::Eof, "", src_.size());
    return std::move(out_);
  }

 private:
  std::string src_;
  LexOptions opt_;
  std::vector<size_t> line_starts_;
  std::vector<Token> out_;
  std::vector<char> balance_;
  bool line_starting_ = true;

  void locate(size_t pos, int& line, int& col) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos);
    const size_t l = static_cast<size_t>(it - line_starts_.begin());
    line = static_cast<int>(l);
    col = static_cast<int>(pos - line_starts_[l - 1]) + 1;
  }

  [[noreturn]] void fail(size_t pos, const std::string& msg) const {
    int line, col;
    locate(pos, line, col);
    throw TemplateError(TemplateError::Kind::Syntax, msg, line, col);
  }

  Token& push(Tok t, std::string text, size_t pos) {
    Token tok{t, std::move(text)};
    locate(pos, tok.line, tok.col);
    out_.push_back(std::move(tok));
    return out_.back();
  }

  // Text before a tag, trimmed as jinja2's OptionalLStrip rule does for the tag's sign.
  void data_before_tag(std::string text, size_t text_pos, char sign, bool is_variable) {
    if (sign == '-') {
      text = py_strip(text, std::nullopt, false, true);
    } else if (sign != '+' && opt_.lstrip_blocks && !is_variable) {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && all_spaces(text, l_pos)) text.resize(l_pos);
    }
    if (!text.empty()) push(Tok::Data, std::move(text), text_pos);
  }

  // The end of a block tag at pos (`+%}`, `-%}` + spaces, `%}` + one newline with
  // trim_blocks), or npos.
  size_t block_end_at(size_t pos, const char* close) const {
    const size_t n = std::strlen(close);
    if (src_[pos] == '+' && starts(src_, pos + 1, close)) return pos + 1 + n;
    if (src_[pos] == '-' && starts(src_, pos + 1, close)) return skip_spaces(src_, pos + 1 + n);
    if (starts(src_, pos, close)) {
      size_t e = pos + n;
      if (opt_.trim_blocks && e < src_.size() && src_[e] == '\n') ++e;
      return e;
    }
    return std::string::npos;
  }

  size_t root(size_t pos) {
    size_t idx = pos;
    while (true) {
      idx = src_.find('{', idx);
      if (idx == std::string::npos || idx + 1 >= src_.size()) break;
      const char k = src_[idx + 1];
      if (k == '{' || k == '%' || k == '#') break;
      ++idx;
    }
    if (idx == std::string::npos || idx + 1 >= src_.size()) {
      push(Tok::Data, src_.substr(pos), pos);
      line_starting_ = src_.back() == '\n';
      return src_.size();
    }
    const char kind = src_[idx + 1];
    const char sign =
        idx + 2 < src_.size() && (src_[idx + 2] == '-' || src_[idx + 2] == '+') ? src_[idx + 2] : 0;
    const size_t tag_end = idx + 2 + (sign ? 1 : 0);
    if (kind == '%') {
      const size_t raw_end = raw_begin_end(tag_end);
      if (raw_end != std::string::npos) {
        data_before_tag(src_.substr(pos, idx - pos), pos, sign, false);
        line_starting_ = src_[raw_end - 1] == '\n';
        return raw_body(raw_end);
      }
    }
    data_before_tag(src_.substr(pos, idx - pos), pos, sign, kind == '{');
    line_starting_ = false;
    if (kind == '#') return comment(tag_end, idx);
    push(kind == '{' ? Tok::VarBegin : Tok::BlockBegin, "", idx);
    return inside_tag(tag_end, kind == '{' ? "}}" : "%}", kind == '%');
  }

  // `{% raw %}` or `{%- raw -%}`: the end of the tag whose body starts at p, or npos.
  size_t raw_begin_end(size_t p) const {
    p = skip_spaces(src_, p);
    if (!starts(src_, p, "raw")) return std::string::npos;
    p = skip_spaces(src_, p + 3);
    if (starts(src_, p, "-%}")) return skip_spaces(src_, p + 3);
    if (starts(src_, p, "%}")) return p + 2;
    return std::string::npos;
  }

  size_t raw_body(size_t body) {
    for (size_t q = src_.find("{%", body); q != std::string::npos; q = src_.find("{%", q + 1)) {
      size_t p = q + 2;
      const char sign = p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p] : 0;
      if (sign) ++p;
      p = skip_spaces(src_, p);
      if (!starts(src_, p, "endraw")) continue;
      p = skip_spaces(src_, p + 6);
      if (p >= src_.size()) continue;
      const size_t end = block_end_at(p, "%}");
      if (end == std::string::npos) continue;
      data_before_tag(src_.substr(body, q - body), body, sign, false);
      line_starting_ = src_[end - 1] == '\n';
      return end;
    }
    fail(body, "Missing end of raw directive");
  }

  size_t comment(size_t p, size_t start) {
    for (; p < src_.size(); ++p) {
      size_t end = std::string::npos;
      if (src_[p] == '+' && starts(src_, p + 1, "#}")) {
        end = p + 3;
      } else if (src_[p] == '-' && starts(src_, p + 1, "#}")) {
        end = skip_spaces(src_, p + 3);
      } else if (starts(src_, p, "#}")) {
        end = p + 2;
        if (opt_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
      }
      if (end != std::string::npos) {
        line_starting_ = src_[end - 1] == '\n';
        return end;
      }
    }
    fail(start, "Missing end of comment tag");
  }

  size_t inside_tag(size_t pos, const char* close, bool is_block) {
    while (pos < src_.size()) {
      if (balance_.empty()) {
        size_t end;
        if (is_block) {
          end = block_end_at(pos, close);
        } else if (src_[pos] == '-' && starts(src_, pos + 1, close)) {
          end = skip_spaces(src_, pos + 3);
        } else {
          end = starts(src_, pos, close) ? pos + 2 : std::string::npos;
        }
        if (end != std::string::npos) {
          push(is_block ? Tok::BlockEnd : Tok::VarEnd, "", pos);
          line_starting_ = src_[end - 1] == '\n';
          return end;
        }
      }
      if (const size_t ws = skip_spaces(src_, pos); ws != pos) {
        line_starting_ = src_[ws - 1] == '\n';
        pos = ws;
        continue;
      }
      line_starting_ = false;
      pos = token(pos);
    }
    return pos;  // unterminated tag: the parser reports the unexpected end
  }

  // Digits with single underscores between them; returns the end or npos.
  size_t digits(size_t p) const {
    if (p >= src_.size() || !is_digit(src_[p])) return std::string::npos;
    ++p;
    while (p < src_.size()) {
      if (is_digit(src_[p])) {
        ++p;
      } else if (src_[p] == '_' && p + 1 < src_.size() && is_digit(src_[p + 1])) {
        p += 2;
      } else {
        break;
      }
    }
    return p;
  }

  size_t number(size_t pos) {
    const size_t int_end = digits(pos);
    const bool after_dot = pos > 0 && src_[pos - 1] == '.';
    size_t p = int_end;
    bool is_float = false;
    if (!after_dot) {
      if (p < src_.size() && src_[p] == '.' && digits(p + 1) != std::string::npos) {
        p = digits(p + 1);
        is_float = true;
      }
      if (p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
        size_t q = p + 1;
        if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
        if (digits(q) != std::string::npos) {
          p = digits(q);
          is_float = true;
        }
      }
    }
    if (!is_float) p = int_end;
    std::string text;
    for (size_t k = pos; k < p; ++k) {
      if (src_[k] != '_') text.push_back(src_[k]);
    }
    if (is_float) {
      push(Tok::Float, text, pos).fval = std::strtod(text.c_str(), nullptr);
      return p;
    }
    // A leading zero allows only more zeros (Python forbids 007).
    if (text.size() > 1 && text[0] == '0') {
      p = pos + 1;
      while (p < src_.size() &&
             (src_[p] == '0' || (src_[p] == '_' && p + 1 < src_.size() && src_[p + 1] == '0'))) {
        ++p;
      }
      push(Tok::Integer, "0", pos);
      return p;
    }
    errno = 0;
    const long long v = std::strtoll(text.c_str(), nullptr, 10);
    if (errno == ERANGE) fail(pos, "integer literal too large");
    push(Tok::Integer, text, pos).ival = v;
    return p;
  }

  size_t string_literal(size_t pos) {
    const char q = src_[pos];
    std::string raw;
    size_t p = pos + 1;
    for (; p < src_.size() && src_[p] != q; ++p) {
      if (src_[p] == '\\') {
        if (p + 1 >= src_.size()) break;
        raw.push_back(src_[p++]);
      }
      raw.push_back(src_[p]);
    }
    if (p >= src_.size()) fail(pos, std::string("unexpected char '") + q + "'");
    push(Tok::String, unescape(raw, pos), pos);
    return p + 1;
  }

  // Python's unicode-escape decoding, as jinja2 applies it to string literals.
  std::string unescape(const std::string& s, size_t pos) const {
    std::string out;
    for (size_t k = 0; k < s.size(); ++k) {
      if (s[k] != '\\' || k + 1 >= s.size()) {
        out.push_back(s[k]);
        continue;
      }
      const char c = s[++k];
      auto hex = [&](size_t n) -> char32_t {
        if (k + n >= s.size()) fail(pos, "truncated escape");
        char32_t v = 0;
        for (size_t j = 1; j <= n; ++j) {
          const char h = s[k + j];
          const int d = is_digit(h)              ? h - '0'
                        : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                        : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                                 : -1;
          if (d < 0) fail(pos, "truncated escape");
          v = v * 16 + static_cast<char32_t>(d);
        }
        k += n;
        return v;
      };
      switch (c) {
        case 'n':
          out.push_back('\n');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 'a':
          out.push_back('\a');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'v':
          out.push_back('\v');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '\'':
          out.push_back('\'');
          break;
        case '"':
          out.push_back('"');
          break;
        case '\n':
          break;
        case 'x':
          utf8_append(out, hex(2));
          break;
        case 'u':
          utf8_append(out, hex(4));
          break;
        case 'U': {
          const char32_t v = hex(8);
          if (v > 0x10FFFF) fail(pos, "illegal Unicode character");
          utf8_append(out, v);
          break;
        }
        default:
          if (c >= '0' && c <= '7') {
            char32_t v = static_cast<char32_t>(c - '0');
            for (int j = 0; j < 2 && k + 1 < s.size() && s[k + 1] >= '0' && s[k + 1] <= '7'; ++j) {
              v = v * 8 + static_cast<char32_t>(s[++k] - '0');
            }
            utf8_append(out, v);
          } else {
            out.push_back('\\');
            out.push_back(c);
          }
      }
    }
    return out;
  }

  size_t token(size_t pos) {
    const char c = src_[pos];
    if (is_digit(c)) return number(pos);
    if (is_name_start(c)) {
      size_t p = pos + 1;
      while (p < src_.size() && (is_name_start(src_[p]) || is_digit(src_[p]))) ++p;
      push(Tok::Name, src_.substr(pos, p - pos), pos);
      return p;
    }
    if (c == '\'' || c == '"') return string_literal(pos);
    static const char* const kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwo) {
      if (starts(src_, pos, op)) {
        push(Tok::Op, op, pos);
        return pos + 2;
      }
    }
    if (!std::strchr("+-/*%~[](){}><=.:|,;", c) || c == 0) {
      fail(pos, std::string("unexpected char '") + c + "'");
    }
    if (c == '(' || c == '[' || c == '{') {
      balance_.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance_.empty()) fail(pos, std::string("unexpected '") + c + "'");
      if (balance_.back() != c) {
        fail(pos, std::string("unexpected '") + c + "', expected '" + balance_.back() + "'");
      }
      balance_.pop_back();
    }
    push(Tok::Op, std::string(1, c), pos);
    return pos + 1;
  }
};

std::string normalize_newlines(const std::string& source) {
  std::string s;
  s.reserve(source.size());
  for (size_t k = 0; k < source.size(); ++k) {
    if (source[k] == '\r') {
      s.push_back('\n');
      if (k + 1 < source.size() && source[k + 1] == '\n') ++k;
    } else {
      s.push_back(source[k]);
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

}  // namespace

std::vector<Token> lex(const std::string& source, const LexOptions& opt) {
  return Lexer(normalize_newlines(source), opt).run();
}

}  // namespace invar::chat
