// Filters on text and numbers (tojson, trim, default, int, round, indent, ...) and the table
// of every filter name jinja2 defines.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "chat/filters_impl.h"
#include "chat/py_string.h"

namespace invar::chat::filters {
namespace {

// soft_str: a string stays what it is (Markup included), anything else becomes str(x).
Value soft_str(const Value& v) {
  return v.is_string() ? v : Value::string(py_str(v));
}

Value f_default(Interp&, const Value& v, CallArgs& a) {
  const Bound b = bind_args(a, {"default_value", "boolean"}, "default");
  if (v.is_undefined() || (flag(b[1]) && !truthy(v))) return b[0] ? *b[0] : Value::string("");
  return v;
}

Value f_length(Interp&, const Value& v, CallArgs& a) {
  bind_args(a, {}, "length");
  return Value::integer(length(v));
}

Value f_tojson(Interp& in, const Value& v, CallArgs& a) {
  const Bound b = bind_args(a, {"ensure_ascii", "indent", "separators", "sort_keys"}, "tojson");
  return in.make_string(tojson(v, b[1], b[2], flag(b[3]), flag(b[0]), in.max_string_bytes()));
}

Value f_trim(Interp& in, const Value& v, CallArgs& a) {
  const Bound b = bind_args(a, {"chars"}, "trim");
  const Value s = soft_str(v);
  std::optional<std::string> chars;
  if (b[0] && !b[0]->is_none()) chars = py_str(*b[0]);
  return in.make_string(py_strip(s.str(), chars, true, true), s.flag);
}

Value f_string(Interp&, const Value& v, CallArgs& a) {
  bind_args(a, {}, "string");
  return soft_str(v);
}

Value f_safe(Interp& in, const Value& v, CallArgs& a) {
  bind_args(a, {}, "safe");
  return in.make_string(py_str(v), true);
}

Value f_escape(Interp& in, const Value& v, CallArgs& a) {
  bind_args(a, {}, "escape");
  if (v.is_string() && v.flag) return v;
  return in.make_string(html_escape(py_str(v)), true);
}

Value f_lower(Interp& in, const Value& v, CallArgs& a) {
  bind_args(a, {}, "lower");
  return in.make_string(py_lower_str(py_str(v)));
}

Value f_upper(Interp& in, const Value& v, CallArgs& a) {
  bind_args(a, {}, "upper");
  return in.make_string(py_upper_str(py_str(v)));
}

Value f_capitalize(Interp& in, const Value& v, CallArgs& a) {
  bind_args(a, {}, "capitalize");
  return in.make_string(py_capitalize(py_str(v)));
}

// jinja2's title: every run split at [-\s({[<]+ gets its first character upper-cased and
// the rest lower-cased.
Value f_title(Interp& in, const Value& v, CallArgs& a) {
  bind_args(a, {}, "title");
  std::string out;
  int prev = -1;  // 1: previous char a delimiter, 0: not, -1: start
  for (char32_t c : utf8_decode(py_str(v))) {
    const bool delim = py_isspace(c) || (c < 0x80 && std::strchr("-({[<", static_cast<char>(c)));
    const bool run_start = prev < 0 || (prev == 1) != delim;
    utf8_append(out, run_start ? py_upper(c) : py_lower(c));
    prev = delim ? 1 : 0;
  }
  return in.make_string(std::move(out));
}

Value f_replace(Interp& in, const Value& v, CallArgs& a) {
  const Bound b = bind_args(a, {"old", "new", "count"}, "replace");
  if (!b[0] || !b[1]) throw EvalError("TypeError: replace() needs old and new");
  const std::string s = py_str(v), from = py_str(*b[0]), to = py_str(*b[1]);
  const uint64_t hits = static_cast<uint64_t>(py_count(s, from));
  if (to.size() > from.size() && hits * (to.size() - from.size()) > in.max_string_bytes()) {
    throw EvalError("string longer than the limit");
  }
  const long count = b[2] && !b[2]->is_none() ? static_cast<long>(b[2]->as_int()) : -1;
  return in.make_string(py_replace(s, from, to, count));
}

// Python's int(str, base): optional sign, underscores between digits, surrounding spaces.
bool parse_int(const std::string& text, int base, int64_t& out) {
  std::string s = py_strip(text, std::nullopt, true, true);
  bool neg = false;
  size_t k = 0;
  if (k < s.size() && (s[k] == '+' || s[k] == '-')) neg = s[k++] == '-';
  if (k + 1 < s.size() && s[k] == '0') {
    const char p = static_cast<char>(s[k + 1] | 0x20);
    const int prefixed = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (prefixed && (base == prefixed || base == 0)) {
      base = prefixed;
      k += 2;
      if (k < s.size() && s[k] == '_') ++k;
    }
  }
  if (base == 0) base = 10;
  if (k >= s.size()) return false;
  int64_t v = 0;
  bool last_digit = false;
  for (; k < s.size(); ++k) {
    const char c = s[k];
    if (c == '_' && last_digit && k + 1 < s.size()) {
      last_digit = false;
      continue;
    }
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'z' ? c - 'a' + 10
            : c >= 'A' && c <= 'Z' ? c - 'A' + 10
                                   : 99;
    if (d >= base) return false;
    if (__builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, d, &v)) return false;
    last_digit = true;
  }
  if (!last_digit) return false;
  out = neg ? -v : v;
  return true;
}

bool parse_float(const std::string& text, double& out) {
  const std::string s = py_strip(text, std::nullopt, true, true);
  if (s.empty()) return false;
  std::string clean;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] == '_' && k > 0 && k + 1 < s.size() &&
        std::isdigit(static_cast<unsigned char>(s[k - 1])) &&
        std::isdigit(static_cast<unsigned char>(s[k + 1]))) {
      continue;
    }
    clean.push_back(s[k]);
  }
  std::string low = py_lower_str(clean);
  if (low == "inf" || low == "+inf" || low == "infinity" || low == "+infinity") {
    out = HUGE_VAL;
    return true;
  }
  if (low == "-inf" || low == "-infinity") {
    out = -HUGE_VAL;
    return true;
  }
  if (low == "nan" || low == "+nan" || low == "-nan") {
    out = std::nan("");
    return true;
  }
  if (low.find_first_of("xp") != std::string::npos) return false;  // strtod accepts hex
  char* end = nullptr;
  out = std::strtod(clean.c_str(), &end);
  return end && *end == 0;
}

Value f_int(Interp&, const Value& v, CallArgs& a) {
  const Bound b = bind_args(a, {"default", "base"}, "int");
  const Value dflt = b[0] ? *b[0] : Value::integer(0);
  v.require_defined();
  const int base = b[1] && b[1]->is_integral() ? static_cast<int>(b[1]->as_int()) : 10;
  if (v.is_integral()) return Value::integer(v.as_int());
  if (v.kind == Kind::Float) {
    if (!std::isfinite(v.f) || std::fabs(v.f) >= 9.2e18) return dflt;
    return Value::integer(static_cast<int64_t>(v.f));
  }
  if (v.is_string()) {
    int64_t r;
    if ((base == 0 || (base >= 2 && base <= 36)) && parse_int(v.str(), base, r))
      return Value::integer(r);
    double d;
    if (parse_float(v.str(), d) && std::isfinite(d) && std::fabs(d) < 9.2e18) {
      return Value::integer(static_cast<int64_t>(d));
    }
  }
  return dflt;
}

Value f_float(Interp&, const Value& v, CallArgs& a) {
  const Bound b = bind_args(a, {"default"}, "float");
  v.require_defined();
  if (v.is_number()) return Value::number(v.as_double());
  double d;
  if (v.is_string() && parse_float(v.str(), d)) return Value::number(d);
  return b[0] ? *b[0] : Value::number(0.0);
}

Value f_abs(Interp&, const Value& v, CallArgs& a) {
  bind_args(a, {}, "abs");
  if (v.is_integral()) return unary_minus(v, v.as_int() < 0);
  if (v.kind == Kind::Float) return Value::number(std::fabs(v.f));
  v.require_defined();
  throw EvalError("TypeError: bad operand type for abs(): '" + type_name(v) + "'");
}

Value f_round(Interp&, const Value& v, CallArgs& a) {
  const Bound b = bind_args(a, {"precision", "method"}, "round");
  const int64_t prec = b[0] ? b[0]->as_int() : 0;
  const std::string method = b[1] ? py_str(*b[1]) : "common";
  if (method != "common" && method != "ceil" && method != "floor") {
    throw EvalError("FilterArgumentError: method must be common, ceil or floor");
  }
  v.require_defined();
  if (!v.is_number()) throw EvalError("TypeError: round() of '" + type_name(v) + "'");
  if (method == "common" && v.is_integral()) return Value::integer(v.as_int());
  const double x = v.as_double();
  const int p = static_cast<int>(std::clamp<int64_t>(prec, -300, 300));
  if (method == "common") {
    // Python rounds the exact binary value half-to-even, as printf does.
    if (p >= 0) {
      char buf[512];
      std::snprintf(buf, sizeof buf, "%.*f", std::min(p, 100), x);
      return Value::number(std::strtod(buf, nullptr));
    }
    const double scale = std::pow(10.0, -p);
    return Value::number(std::nearbyint(x / scale) * scale);
  }
  const double scale = std::pow(10.0, p);
  return Value::number((method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale)) / scale);
}

Value f_indent(Interp& in, const Value& v, CallArgs& a) {
  const Bound b = bind_args(a, {"width", "first", "blank"}, "indent");
  v.require_defined();
  std::string pad;
  if (b[0] && b[0]->is_string()) {
    pad = b[0]->str();
  } else {
    const int64_t w = b[0] ? b[0]->as_int() : 4;
    pad = std::string(static_cast<size_t>(std::clamp<int64_t>(w, 0, 1024)), ' ');
  }
  const std::vector<std::string> lines = py_splitlines(py_str(v) + "\n");
  std::string out;
  for (size_t k = 0; k < lines.size(); ++k) {
    if (k > 0) {
      out += "\n";
      if (flag(b[2]) || !lines[k].empty()) out += pad;
    }
    out += lines[k];
    if (out.size() > in.max_string_bytes()) throw EvalError("string longer than the limit");
  }
  if (flag(b[1])) out = pad + out;
  return in.make_string(std::move(out), v.is_string() && v.flag);
}

Value f_wordcount(Interp&, const Value& v, CallArgs& a) {
  bind_args(a, {}, "wordcount");
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : utf8_decode(py_str(v))) {
    const bool w = py_isalnum(c) || c == '_';
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

Value f_center(Interp& in, const Value& v, CallArgs& a) {
  const Bound b = bind_args(a, {"width"}, "center");
  const std::string s = py_str(v);
  const int64_t width = std::min<int64_t>(b[0] ? b[0]->as_int() : 80, 1 << 20);
  const int64_t len = static_cast<int64_t>(utf8_length(s));
  if (width <= len) return in.make_string(s);
  const int64_t total = width - len;
  // CPython: left = total / 2 + (total & width & 1)
  const int64_t left = total / 2 + (total & width & 1);
  return in.make_string(std::string(static_cast<size_t>(left), ' ') + s +
                        std::string(static_cast<size_t>(total - left), ' '));
}

Value f_format(Interp& in, const Value& v, CallArgs& a) {
  Value args;
  if (!a.kw.empty()) {
    Object o;
    for (const auto& [k, x] : a.kw) o.set(Value::string(k), x);
    args = Value::object(std::move(o));
  } else {
    args = Value::array(a.pos, true);
  }
  return binary_op(in, "%", soft_str(v), args);
}

Value f_attr(Interp&, const Value& v, CallArgs& a) {
  const Bound b = bind_args(a, {"name"}, "attr");
  if (!b[0]) throw EvalError("attr needs a name");
  return get_attr(v, py_str(*b[0]));
}

Value f_unsupported(Interp&, const Value&, CallArgs&) {
  throw EvalError("this jinja2 filter is not supported by invar");
}

struct Entry {
  const char* name;
  FilterFn fn;
};
constexpr Entry kFilters[] = {
    {"abs", f_abs},
    {"attr", f_attr},
    {"batch", f_batch},
    {"capitalize", f_capitalize},
    {"center", f_center},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"e", f_escape},
    {"escape", f_escape},
    {"filesizeformat", f_unsupported},
    {"first", f_first},
    {"float", f_float},
    {"forceescape", f_escape},
    {"format", f_format},
    {"groupby", f_unsupported},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"map", f_map},
    {"max", f_max},
    {"min", f_min},
    {"pprint", f_unsupported},
    {"random", f_unsupported},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_safe},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"slice", f_unsupported},
    {"sort", f_sort},
    {"string", f_string},
    {"striptags", f_unsupported},
    {"sum", f_sum},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"truncate", f_unsupported},
    {"unique", f_unique},
    {"upper", f_upper},
    {"urlencode", f_unsupported},
    {"urlize", f_unsupported},
    {"wordcount", f_wordcount},
    {"wordwrap", f_unsupported},
    {"xmlattr", f_unsupported},
};

}  // namespace
}  // namespace invar::chat::filters

namespace invar::chat {

FilterFn find_filter(const std::string& name) {
  for (const auto& e : filters::kFilters) {
    if (name == e.name) return e.fn;
  }
  return nullptr;
}

}  // namespace invar::chat
