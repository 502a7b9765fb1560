// jinja2's tests: `x is defined`, `x is string`, `x is divisibleby 3`, ...
#include <cstring>

#include "chat/builtins.h"
#include "chat/eval.h"
#include "chat/py_string.h"

namespace invar::chat {
namespace {

const Value& arg0(CallArgs& a, const char* test) {
  if (!a.pos.empty()) return a.pos[0];
  if (!a.kw.empty()) return a.kw[0].second;
  throw EvalError(std::string("TypeError: test '") + test + "' needs an argument");
}

bool t_defined(Interp&, const Value& v, CallArgs&) {
  return !v.is_undefined();
}
bool t_undefined(Interp&, const Value& v, CallArgs&) {
  return v.is_undefined();
}
bool t_none(Interp&, const Value& v, CallArgs&) {
  return v.is_none();
}
bool t_boolean(Interp&, const Value& v, CallArgs&) {
  return v.kind == Kind::Bool;
}
bool t_true(Interp&, const Value& v, CallArgs&) {
  return v.kind == Kind::Bool && v.b;
}
bool t_false(Interp&, const Value& v, CallArgs&) {
  return v.kind == Kind::Bool && !v.b;
}
bool t_integer(Interp&, const Value& v, CallArgs&) {
  return v.kind == Kind::Int;
}
bool t_float(Interp&, const Value& v, CallArgs&) {
  return v.kind == Kind::Float;
}
bool t_number(Interp&, const Value& v, CallArgs&) {
  return v.is_number();
}
bool t_string(Interp&, const Value& v, CallArgs&) {
  return v.is_string();
}
bool t_mapping(Interp&, const Value& v, CallArgs&) {
  return v.is_dict();
}
bool t_iterable(Interp&, const Value& v, CallArgs&) {
  return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
}
bool t_callable(Interp&, const Value& v, CallArgs&) {
  return v.kind == Kind::Callable;
}
bool t_escaped(Interp&, const Value& v, CallArgs&) {
  return v.is_string() && v.flag;
}

bool t_sameas(Interp&, const Value& v, CallArgs& a) {
  const Value& o = arg0(a, "sameas");
  if (v.kind != o.kind) return false;
  switch (v.kind) {
    case Kind::None:
    case Kind::Undefined:
      return true;
    case Kind::Bool:
      return v.b == o.b;
    case Kind::Int:
      return v.i == o.i && v.i >= -5 && v.i <= 256;  // CPython's cached ints
    case Kind::String:
      return v.s == o.s;
    case Kind::List:
      return v.list == o.list;
    case Kind::Dict:
      return v.dict == o.dict;
    case Kind::Callable:
      return v.fn == o.fn;
    case Kind::Namespace:
      return v.ns == o.ns;
    default:
      return false;
  }
}

bool t_eq(Interp&, const Value& v, CallArgs& a) {
  return equal(v, arg0(a, "eq"));
}
bool t_ne(Interp&, const Value& v, CallArgs& a) {
  return !equal(v, arg0(a, "ne"));
}
bool t_lt(Interp&, const Value& v, CallArgs& a) {
  return less(v, arg0(a, "lt"));
}
bool t_gt(Interp&, const Value& v, CallArgs& a) {
  return less(arg0(a, "gt"), v);
}
bool t_le(Interp&, const Value& v, CallArgs& a) {
  return !less(arg0(a, "le"), v);
}
bool t_ge(Interp&, const Value& v, CallArgs& a) {
  return !less(v, arg0(a, "ge"));
}
bool t_in(Interp&, const Value& v, CallArgs& a) {
  return contains(arg0(a, "in"), v);
}

bool t_divisibleby(Interp& in, const Value& v, CallArgs& a) {
  return !truthy(binary_op(in, "%", v, arg0(a, "divisibleby")));
}
bool t_odd(Interp& in, const Value& v, CallArgs&) {
  return equal(binary_op(in, "%", v, Value::integer(2)), Value::integer(1));
}
bool t_even(Interp& in, const Value& v, CallArgs&) {
  return equal(binary_op(in, "%", v, Value::integer(2)), Value::integer(0));
}
bool t_lower(Interp&, const Value& v, CallArgs&) {
  const std::string s = py_str(v);
  return py_lower_str(s) == s && py_upper_str(s) != s;
}
bool t_upper(Interp&, const Value& v, CallArgs&) {
  const std::string s = py_str(v);
  return py_upper_str(s) == s && py_lower_str(s) != s;
}
bool t_filter(Interp&, const Value& v, CallArgs&) {
  return v.is_string() && filter_exists(v.str());
}
bool t_test(Interp&, const Value& v, CallArgs&) {
  return v.is_string() && test_exists(v.str());
}

struct Entry {
  const char* name;
  TestFn fn;
};
constexpr Entry kTests[] = {
    {"defined", t_defined},
    {"undefined", t_undefined},
    {"none", t_none},
    {"boolean", t_boolean},
    {"true", t_true},
    {"false", t_false},
    {"integer", t_integer},
    {"float", t_float},
    {"number", t_number},
    {"string", t_string},
    {"mapping", t_mapping},
    {"iterable", t_iterable},
    {"sequence", t_iterable},
    {"callable", t_callable},
    {"escaped", t_escaped},
    {"sameas", t_sameas},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"==", t_eq},
    {"ne", t_ne},
    {"!=", t_ne},
    {"lt", t_lt},
    {"lessthan", t_lt},
    {"<", t_lt},
    {"le", t_le},
    {"<=", t_le},
    {"gt", t_gt},
    {"greaterthan", t_gt},
    {">", t_gt},
    {"ge", t_ge},
    {">=", t_ge},
    {"in", t_in},
    {"divisibleby", t_divisibleby},
    {"odd", t_odd},
    {"even", t_even},
    {"lower", t_lower},
    {"upper", t_upper},
    {"filter", t_filter},
    {"test", t_test},
};

}  // namespace

TestFn find_test(const std::string& name) {
  for (const Entry& e : kTests) {
    if (name == e.name) return e.fn;
  }
  return nullptr;
}

}  // namespace invar::chat
