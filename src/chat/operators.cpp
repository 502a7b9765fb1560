// Python's arithmetic, membership, attribute and item access as jinja2's sandbox applies them.
#include <cmath>
#include <cstdint>

#include "chat/builtins.h"
#include "chat/eval.h"
#include "chat/py_string.h"

namespace invar::chat {
namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  throw EvalError("TypeError: unsupported operand type(s) for " + op + ": '" + type_name(a) +
                  "' and '" + type_name(b) + "'");
}

// Python ints are unbounded; ours are 64-bit and refuse to wrap.
template <typename Op>
int64_t checked(int64_t a, int64_t b, Op op) {
  int64_t r;
  if (op(a, b, &r)) throw EvalError("OverflowError: integer result out of range");
  return r;
}
bool add_ovf(int64_t a, int64_t b, int64_t* r) {
  return __builtin_add_overflow(a, b, r);
}
bool sub_ovf(int64_t a, int64_t b, int64_t* r) {
  return __builtin_sub_overflow(a, b, r);
}
bool mul_ovf(int64_t a, int64_t b, int64_t* r) {
  return __builtin_mul_overflow(a, b, r);
}

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) throw EvalError("ZeroDivisionError: integer division or modulo by zero");
  if (a == INT64_MIN && b == -1) throw EvalError("OverflowError: integer result out of range");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

Value repeat(Interp& in, const Value& seq, int64_t n) {
  if (n <= 0) return seq.is_string() ? Value::string("") : in.make_list({}, seq.flag);
  const uint64_t unit = seq.is_string() ? seq.str().size() : seq.list->size() * sizeof(Value);
  if (unit == 0) return seq;
  if (static_cast<uint64_t>(n) > (uint64_t{1} << 40) / unit) {
    throw EvalError("MemoryError: repetition result too large");
  }
  in.charge(unit * static_cast<uint64_t>(n));
  if (seq.is_string()) {
    std::string s;
    s.reserve(seq.str().size() * static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) s += seq.str();
    return in.make_string(std::move(s));
  }
  Array a;
  for (int64_t k = 0; k < n; ++k) a.insert(a.end(), seq.list->begin(), seq.list->end());
  return Value::array(std::move(a), seq.flag);
}

// printf-style `str % args`: %s %r %d %i %% and %(name)s.
std::string percent_format(const std::string& fmt, const Value& args) {
  Array pos;
  if (args.is_list() && args.flag) {
    pos = *args.list;
  } else if (!args.is_dict()) {
    pos.push_back(args);
  }
  size_t next = 0;
  std::string out;
  for (size_t k = 0; k < fmt.size(); ++k) {
    if (fmt[k] != '%') {
      out.push_back(fmt[k]);
      continue;
    }
    if (++k >= fmt.size()) throw EvalError("ValueError: incomplete format");
    if (fmt[k] == '%') {
      out.push_back('%');
      continue;
    }
    Value v;
    if (fmt[k] == '(') {
      const size_t close = fmt.find(')', k);
      if (close == std::string::npos || !args.is_dict()) {
        throw EvalError("TypeError: format requires a mapping");
      }
      const Value* found = args.dict->find(fmt.substr(k + 1, close - k - 1));
      if (!found) throw EvalError("KeyError: '" + fmt.substr(k + 1, close - k - 1) + "'");
      v = *found;
      k = close + 1;
      if (k >= fmt.size()) throw EvalError("ValueError: incomplete format");
    } else {
      if (next >= pos.size()) throw EvalError("TypeError: not enough arguments for format string");
      v = pos[next++];
    }
    switch (fmt[k]) {
      case 's':
        out += py_str(v);
        break;
      case 'r':
        out += py_repr(v);
        break;
      case 'd':
      case 'i':
        if (!v.is_number()) throw EvalError("TypeError: %d format: a real number is required");
        out += std::to_string(v.kind == Kind::Float ? static_cast<int64_t>(v.f) : v.as_int());
        break;
      default:
        throw EvalError(std::string("ValueError: unsupported format character '") + fmt[k] + "'");
    }
  }
  if (next < pos.size() && !args.is_dict()) {
    throw EvalError("TypeError: not all arguments converted during string formatting");
  }
  return out;
}

}  // namespace

Value binary_op(Interp& in, const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return in.make_string(py_str(a) + py_str(b));
  a.require_defined();
  b.require_defined();
  const bool ints = a.is_integral() && b.is_integral();
  const bool nums = a.is_number() && b.is_number();
  if (op == "+") {
    if (ints) return Value::integer(checked(a.as_int(), b.as_int(), add_ovf));
    if (nums) return Value::number(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) {
      // markupsafe: Markup + str escapes the str (and str + Markup likewise).
      if (a.flag != b.flag) {
        return in.make_string(
            (a.flag ? a.str() : html_escape(a.str())) + (b.flag ? b.str() : html_escape(b.str())),
            true);
      }
      return in.make_string(a.str() + b.str(), a.flag);
    }
    if (a.is_list() && b.is_list() && a.flag == b.flag) {
      Array out = *a.list;
      out.insert(out.end(), b.list->begin(), b.list->end());
      return in.make_list(std::move(out), a.flag);
    }
    unsupported("+", a, b);
  }
  if (op == "-") {
    if (ints) return Value::integer(checked(a.as_int(), b.as_int(), sub_ovf));
    if (nums) return Value::number(a.as_double() - b.as_double());
    unsupported("-", a, b);
  }
  if (op == "*") {
    if (ints) return Value::integer(checked(a.as_int(), b.as_int(), mul_ovf));
    if (nums) return Value::number(a.as_double() * b.as_double());
    if ((a.is_string() || a.is_list()) && b.is_integral()) return repeat(in, a, b.as_int());
    if ((b.is_string() || b.is_list()) && a.is_integral()) return repeat(in, b, a.as_int());
    unsupported("*", a, b);
  }
  if (op == "/") {
    if (!nums) unsupported("/", a, b);
    if (b.as_double() == 0) throw EvalError("ZeroDivisionError: division by zero");
    return Value::number(a.as_double() / b.as_double());
  }
  if (op == "//") {
    if (ints) return Value::integer(floor_div(a.as_int(), b.as_int()));
    if (!nums) unsupported("//", a, b);
    if (b.as_double() == 0) throw EvalError("ZeroDivisionError: float floor division by zero");
    return Value::number(std::floor(a.as_double() / b.as_double()));
  }
  if (op == "%") {
    if (a.is_string()) return in.make_string(percent_format(a.str(), b));
    if (ints) {
      const int64_t q = floor_div(a.as_int(), b.as_int());
      return Value::integer(a.as_int() - q * b.as_int());
    }
    if (!nums) unsupported("%", a, b);
    if (b.as_double() == 0) throw EvalError("ZeroDivisionError: float modulo");
    double m = std::fmod(a.as_double(), b.as_double());
    if (m != 0 && ((m < 0) != (b.as_double() < 0))) m += b.as_double();
    return Value::number(m);
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      int64_t base = a.as_int(), e = b.as_int(), acc = 1;
      while (e > 0) {
        if (e & 1) acc = checked(acc, base, mul_ovf);
        e >>= 1;
        if (e > 0) base = checked(base, base, mul_ovf);
      }
      return Value::integer(acc);
    }
    if (!nums) unsupported("** or pow()", a, b);
    if (a.as_double() == 0 && b.as_double() < 0) {
      throw EvalError("ZeroDivisionError: 0.0 cannot be raised to a negative power");
    }
    return Value::number(std::pow(a.as_double(), b.as_double()));
  }
  throw EvalError("unknown operator " + op);
}

Value unary_minus(const Value& v, bool negate) {
  v.require_defined();
  if (v.is_integral()) {
    if (!negate) return Value::integer(v.as_int());
    if (v.as_int() == INT64_MIN) throw EvalError("OverflowError: integer result out of range");
    return Value::integer(-v.as_int());
  }
  if (v.kind == Kind::Float) return Value::number(negate ? -v.f : v.f);
  throw EvalError(std::string("TypeError: bad operand type for unary ") + (negate ? "-" : "+") +
                  ": '" + type_name(v) + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case Kind::Undefined:
      return false;
    case Kind::String:
      if (!item.is_string()) {
        throw EvalError("TypeError: 'in <string>' requires string as left operand, not " +
                        type_name(item));
      }
      return container.str().find(item.str()) != std::string::npos;
    case Kind::List:
      for (const Value& x : *container.list) {
        if (equal(x, item)) return true;
      }
      return false;
    case Kind::Dict:
      return container.dict->find(item) != nullptr;
    default:
      throw EvalError("TypeError: argument of type '" + type_name(container) + "' is not iterable");
  }
}

static std::string owner(const Value& obj) {
  return obj.is_none() ? "None" : type_name(obj) + " object";
}

Value get_attr(const Value& obj, const std::string& name) {
  obj.require_defined();
  Value m = get_method(obj, name);
  if (!m.is_undefined()) return m;
  if (obj.is_dict()) {
    if (const Value* v = obj.dict->find(name)) return *v;
  } else if (obj.kind == Kind::Namespace) {
    if (const Value* v = obj.ns->attrs.find(name)) return *v;
  }
  return Value::undefined("'" + owner(obj) + "' has no attribute '" + name + "'");
}

Value get_item(Interp& in, const Value& obj, const Value& key) {
  (void)in;
  obj.require_defined();
  if ((obj.is_list() || obj.is_string()) && key.is_integral()) {
    const int64_t n = length(obj);
    int64_t k = key.as_int();
    if (k < 0) k += n;
    if (k >= 0 && k < n) {
      if (obj.is_list()) return (*obj.list)[static_cast<size_t>(k)];
      const std::u32string u = utf8_decode(obj.str());
      return Value::string(utf8_encode(std::u32string_view(u).substr(static_cast<size_t>(k), 1)));
    }
  } else if (obj.is_dict()) {
    try {
      if (const Value* v = obj.dict->find(key)) return *v;
    } catch (const EvalError&) {  // unhashable key: TypeError, which jinja2 turns into undefined
    }
  }
  if (key.is_string()) {
    if (obj.kind == Kind::Namespace) {
      if (const Value* v = obj.ns->attrs.find(key.str())) return *v;
    }
    Value m = get_method(obj, key.str());
    if (!m.is_undefined()) return m;
    return Value::undefined("'" + owner(obj) + "' has no attribute '" + key.str() + "'");
  }
  return Value::undefined(owner(obj) + " has no element " + py_repr(key));
}

Value slice(Interp& in, const Value& obj, const Value& start, const Value& stop,
            const Value& step) {
  obj.require_defined();
  if (!obj.is_list() && !obj.is_string()) {
    return Value::undefined(owner(obj) + " has no element slice");
  }
  for (const Value* v : {&start, &stop, &step}) {
    if (!v->is_none() && !v->is_integral()) {
      throw EvalError("TypeError: slice indices must be integers or None");
    }
  }
  const int64_t st = step.is_none() ? 1 : step.as_int();
  if (st == 0) throw EvalError("ValueError: slice step cannot be zero");
  const int64_t n = length(obj);
  auto adjust = [&](const Value& v, int64_t dflt) {
    if (v.is_none()) return dflt;
    int64_t x = v.as_int();
    if (x < 0) {
      x += n;
      if (x < 0) x = st < 0 ? -1 : 0;
    } else if (x >= n) {
      x = st < 0 ? n - 1 : n;
    }
    return x;
  };
  const int64_t a = adjust(start, st < 0 ? n - 1 : 0);
  const int64_t b = adjust(stop, st < 0 ? -1 : n);
  std::vector<size_t> idx;
  for (int64_t k = a; st > 0 ? k < b : k > b; k += st) idx.push_back(static_cast<size_t>(k));
  if (obj.is_list()) {
    Array out;
    out.reserve(idx.size());
    for (size_t k : idx) out.push_back((*obj.list)[k]);
    return in.make_list(std::move(out), obj.flag);
  }
  const std::u32string u = utf8_decode(obj.str());
  std::u32string out;
  for (size_t k : idx) out.push_back(u[k]);
  return in.make_string(utf8_encode(out));
}

}  // namespace invar::chat
