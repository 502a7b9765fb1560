// jinja2's built-in filters, tests and globals, and the Python methods templates call on
// strings, dicts and lists.
#pragma once

#include <string>

#include "chat/value.h"

namespace invar::chat {

using FilterFn = Value (*)(Interp& in, const Value& input, CallArgs& args);
using TestFn = bool (*)(Interp& in, const Value& v, CallArgs& args);

FilterFn find_filter(const std::string& name);  // null when jinja2 has no such filter
TestFn find_test(const std::string& name);
inline bool filter_exists(const std::string& name) {
  return find_filter(name) != nullptr;
}
inline bool test_exists(const std::string& name) {
  return find_test(name) != nullptr;
}

// range, namespace, dict, raise_exception, strftime_now, ...; undefined when unknown.
Value global_function(const std::string& name);
// obj.name when name is a method of obj's Python type: a callable bound to obj, or an
// unsafe callable for the mutating ones the sandbox refuses; undefined when there is none.
Value get_method(const Value& obj, const std::string& name);

// Positional and keyword arguments bound to a Python signature: names in order, each
// either given or absent (then the caller uses its default).
struct Bound {
  std::vector<const Value*> v;
  const Value* operator[](size_t k) const { return v[k]; }
};
Bound bind_args(const CallArgs& args, std::initializer_list<const char*> names, const char* fn);

// Python's int(), float() and str.format used by filters and methods.
std::string py_format(Interp& in, const std::string& fmt, const CallArgs& args);
std::string tojson(const Value& v, const Value* indent, const Value* separators, bool sort_keys,
                   bool ensure_ascii, size_t max_bytes);

}  // namespace invar::chat
