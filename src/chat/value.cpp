#include "chat/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "chat/py_string.h"

namespace invar::chat {

Value Value::undefined(std::string message) {
  Value v;
  v.s = std::make_shared<const std::string>(std::move(message));
  return v;
}
Value Value::none() {
  Value v;
  v.kind = Kind::None;
  return v;
}
Value Value::boolean(bool x) {
  Value v;
  v.kind = Kind::Bool;
  v.b = x;
  return v;
}
Value Value::integer(int64_t x) {
  Value v;
  v.kind = Kind::Int;
  v.i = x;
  return v;
}
Value Value::number(double x) {
  Value v;
  v.kind = Kind::Float;
  v.f = x;
  return v;
}
Value Value::string(std::string x, bool markup) {
  Value v;
  v.kind = Kind::String;
  v.flag = markup;
  v.s = std::make_shared<const std::string>(std::move(x));
  return v;
}
Value Value::array(Array x, bool tuple) {
  Value v;
  v.kind = Kind::List;
  v.flag = tuple;
  v.list = std::make_shared<const Array>(std::move(x));
  return v;
}
Value Value::object(Object x) {
  Value v;
  v.kind = Kind::Dict;
  v.dict = std::make_shared<const Object>(std::move(x));
  return v;
}
Value Value::callable(std::shared_ptr<const Callable> f) {
  Value v;
  v.kind = Kind::Callable;
  v.fn = std::move(f);
  return v;
}

void Value::require_defined() const {
  if (kind == Kind::Undefined) throw EvalError(s ? *s : std::string("value is undefined"));
}

std::string hash_key(const Value& v) {
  RecursionGuard guard;
  switch (v.kind) {
    case Kind::None:
      return "N";
    case Kind::Bool:
    case Kind::Int:
      return "n" + std::to_string(v.as_int());
    case Kind::Float:
      if (std::isfinite(v.f) && v.f == std::floor(v.f) && std::fabs(v.f) < 9.2e18) {
        return "n" + std::to_string(static_cast<int64_t>(v.f));
      }
      return "f" + float_repr(v.f);
    case Kind::String:
      return "s" + v.str();
    case Kind::List:
      if (v.flag) {
        std::string k = "t(";
        for (const Value& x : *v.list) k += hash_key(x) + ",";
        return k + ")";
      }
      throw EvalError("TypeError: unhashable type: 'list'");
    case Kind::Dict:
      throw EvalError("TypeError: unhashable type: 'dict'");
    case Kind::Undefined:
      return "U";
    default:
      return "o" + std::to_string(reinterpret_cast<uintptr_t>(v.fn.get()) ^
                                  reinterpret_cast<uintptr_t>(v.ns.get()));
  }
}

const Value* Object::find(const Value& key) const {
  const auto it = index_.find(hash_key(key));
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

const Value* Object::find(const std::string& key) const {
  const auto it = index_.find("s" + key);
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

void Object::set(Value key, Value v) {
  std::string k = hash_key(key);
  const auto it = index_.find(k);
  if (it != index_.end()) {
    items_[it->second].second = std::move(v);
    return;
  }
  index_.emplace(std::move(k), items_.size());
  items_.emplace_back(std::move(key), std::move(v));
}

std::string type_name(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return v.flag ? "Markup" : "str";
    case Kind::List:
      return v.flag ? "tuple" : "list";
    case Kind::Dict:
      return "dict";
    case Kind::Callable:
      return "function";
    case Kind::Namespace:
      return "Namespace";
  }
  return "object";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return v.b;
    case Kind::Int:
      return v.i != 0;
    case Kind::Float:
      return v.f != 0;
    case Kind::String:
      return !v.str().empty();
    case Kind::List:
      return !v.list->empty();
    case Kind::Dict:
      return v.dict->size() != 0;
    default:
      return true;
  }
}

bool equal(const Value& a, const Value& b) {
  RecursionGuard guard;
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::Float || b.kind == Kind::Float) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::Undefined:
    case Kind::None:
      return true;
    case Kind::String:
      return a.str() == b.str();
    case Kind::List: {
      if (a.flag != b.flag || a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k) {
        if (!equal((*a.list)[k], (*b.list)[k])) return false;
      }
      return true;
    }
    case Kind::Dict: {
      if (a.dict->size() != b.dict->size()) return false;
      for (const auto& [k, x] : a.dict->items()) {
        const Value* y = b.dict->find(k);
        if (!y || !equal(x, *y)) return false;
      }
      return true;
    }
    case Kind::Callable:
      return a.fn == b.fn;
    case Kind::Namespace:
      return a.ns == b.ns;
    default:
      return false;
  }
}

bool less(const Value& a, const Value& b) {
  RecursionGuard guard;
  a.require_defined();
  b.require_defined();
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::Float || b.kind == Kind::Float) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 order = code point order
  if (a.is_list() && b.is_list() && a.flag == b.flag) {
    const Array &x = *a.list, &y = *b.list;
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (!equal(x[k], y[k])) return less(x[k], y[k]);
    }
    return x.size() < y.size();
  }
  throw EvalError("TypeError: '<' not supported between instances of '" + type_name(a) + "' and '" +
                  type_name(b) + "'");
}

std::string float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  if (x == 0) return std::signbit(x) ? "-0.0" : "0.0";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  const std::string sci(buf, r.ptr);  // [-]d[.ddd]e[+-]XX
  const size_t e = sci.find('e');
  const int exp10 = std::stoi(sci.substr(e + 1));
  std::string mant = sci.substr(0, e);
  const bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits.push_back(c);
  }
  std::string out = neg ? "-" : "";
  if (exp10 < -4 || exp10 >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    return out + eb;
  }
  if (exp10 < 0) return out + "0." + std::string(-exp10 - 1, '0') + digits;
  const size_t int_len = static_cast<size_t>(exp10) + 1;
  if (digits.size() <= int_len)
    return out + digits + std::string(int_len - digits.size(), '0') + ".0";
  return out + digits.substr(0, int_len) + "." + digits.substr(int_len);
}

constexpr size_t kMaxReprBytes = size_t{64} << 20;

static std::string repr_string(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (char32_t c : utf8_decode(s)) {
    char buf[16];
    if (c == static_cast<char32_t>(q) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) {
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      out += buf;
    } else if (c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
               (c >= 0x205F && c <= 0x206F) || c == 0x3000 || c == 0xFEFF ||
               (c >= 0xD800 && c <= 0xDFFF)) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      utf8_append(out, c);
    }
  }
  out.push_back(q);
  return out;
}

std::string py_repr(const Value& v) {
  RecursionGuard guard;
  switch (v.kind) {
    case Kind::String:
      return v.flag ? "Markup(" + repr_string(v.str()) + ")" : repr_string(v.str());
    case Kind::List: {
      std::string out = v.flag ? "(" : "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += ", ";
        out += py_repr((*v.list)[k]);
        if (out.size() > kMaxReprBytes) throw EvalError("repr longer than the limit");
      }
      if (v.flag && v.list->size() == 1) out += ",";
      return out + (v.flag ? ")" : "]");
    }
    case Kind::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, x] : v.dict->items()) {
        if (!first) out += ", ";
        first = false;
        out += py_repr(k) + ": " + py_repr(x);
        if (out.size() > kMaxReprBytes) throw EvalError("repr longer than the limit");
      }
      return out + "}";
    }
    case Kind::Undefined:
      return "Undefined";
    default:
      return py_str(v);
  }
}

std::string py_str(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
      return "";
    case Kind::None:
      return "None";
    case Kind::Bool:
      return v.b ? "True" : "False";
    case Kind::Int:
      return std::to_string(v.i);
    case Kind::Float:
      return float_repr(v.f);
    case Kind::String:
      return v.str();
    case Kind::Callable:
      return "<function " + v.fn->name + ">";
    case Kind::Namespace:
      return "<Namespace " + py_repr(Value::object(v.ns->attrs)) + ">";
    default:
      return py_repr(v);
  }
}

Array iterate(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
      return {};
    case Kind::List:
      return *v.list;
    case Kind::Dict: {
      Array out;
      out.reserve(v.dict->size());
      for (const auto& kv : v.dict->items()) out.push_back(kv.first);
      return out;
    }
    case Kind::String: {
      Array out;
      for (char32_t c : utf8_decode(v.str())) out.push_back(Value::string(utf8_encode({&c, 1})));
      return out;
    }
    default:
      throw EvalError("TypeError: '" + type_name(v) + "' object is not iterable");
  }
}

int64_t length(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
      return 0;
    case Kind::String:
      return static_cast<int64_t>(utf8_length(v.str()));
    case Kind::List:
      return static_cast<int64_t>(v.list->size());
    case Kind::Dict:
      return static_cast<int64_t>(v.dict->size());
    default:
      throw EvalError("TypeError: object of type '" + type_name(v) + "' has no len()");
  }
}

}  // namespace invar::chat

namespace invar::chat {
namespace {
thread_local int recursion_depth = 0;
thread_local uint64_t work_left = UINT64_MAX;
constexpr int kMaxRecursion = 400;

// While a ~Value is destroying what it owned, the containers that values inside it owned last
// are parked here instead of being destroyed within it; that outermost ~Value then destroys them
// one at a time, so the stack stays flat however deep the nesting. (A pointer to the outermost
// call's list, not a thread_local list: Values destroyed at thread exit or static destruction
// would outlive that.)
thread_local std::vector<std::shared_ptr<const void>>* parking = nullptr;

template <typename T>
void park(std::shared_ptr<T>& p) {
  if (p && p.use_count() == 1) parking->push_back(std::move(p));
}
}  // namespace

void Value::release() {
  if (parking) {
    park(list);
    park(dict);
    park(fn);
    park(ns);
    return;
  }
  std::vector<std::shared_ptr<const void>> parked;
  parking = &parked;
  list.reset();
  dict.reset();
  fn.reset();
  ns.reset();
  while (!parked.empty()) {
    const std::shared_ptr<const void> last = std::move(parked.back());
    parked.pop_back();
  }
  parking = nullptr;
}

void RecursionGuard::set_budget(uint64_t visits) {
  work_left = visits;
}

RecursionGuard::RecursionGuard() {
  if (work_left == 0) {
    throw EvalError("template exceeded the work limit walking nested values");
  }
  --work_left;
  if (++recursion_depth > kMaxRecursion) {
    --recursion_depth;
    throw EvalError("RecursionError: data nested too deeply (limit " +
                    std::to_string(kMaxRecursion) + ")");
  }
}
RecursionGuard::~RecursionGuard() {
  --recursion_depth;
}

}  // namespace invar::chat
