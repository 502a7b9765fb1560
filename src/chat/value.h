// The values a chat template computes with: Python's types as jinja2 sees them (None, bool,
// int, float, str, list/tuple, dict in insertion order, jinja2's Undefined, namespace objects
// and callables). Lists and dicts are immutable once built (transformers renders in jinja2's
// ImmutableSandboxedEnvironment), so copies share storage; only a namespace is mutable.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"

namespace invar::chat {

// A failure inside template evaluation; the evaluator attaches the line and column.
class EvalError : public Error {
 public:
  explicit EvalError(const std::string& what) : Error(what) {}
};

struct Value;
class Object;
struct Callable;
struct Namespace;
using Array = std::vector<Value>;

enum class Kind : uint8_t {
  Undefined,
  None,
  Bool,
  Int,
  Float,
  String,
  List,
  Dict,
  Callable,
  Namespace
};

struct Value {
  Kind kind = Kind::Undefined;
  bool flag = false;  // String: markupsafe.Markup (from `safe`); List: a tuple
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::shared_ptr<const std::string> s;  // String text; for Undefined the error to raise on use
  std::shared_ptr<const Array> list;
  std::shared_ptr<const Object> dict;
  std::shared_ptr<const Callable> fn;
  std::shared_ptr<Namespace> ns;

  Value() = default;
  Value(const Value&) = default;
  Value(Value&&) = default;
  Value& operator=(const Value&) = default;
  Value& operator=(Value&&) = default;
  // Values can nest a million deep (a namespace wrapping its own list in a list, over and
  // over), so the last owner of a container does not destroy it recursively (see value.cpp).
  ~Value() {
    if (list || dict || fn || ns) release();
  }

  static Value undefined(std::string message);
  static Value none();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value number(double v);
  static Value string(std::string v, bool markup = false);
  static Value array(Array v, bool tuple = false);
  static Value object(Object v);
  static Value callable(std::shared_ptr<const Callable> f);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_string() const { return kind == Kind::String; }
  bool is_list() const { return kind == Kind::List; }
  bool is_dict() const { return kind == Kind::Dict; }
  // bool is an int subclass in Python: True + 1 == 2.
  bool is_integral() const { return kind == Kind::Int || kind == Kind::Bool; }
  bool is_number() const { return is_integral() || kind == Kind::Float; }
  const std::string& str() const { return *s; }
  int64_t as_int() const { return kind == Kind::Bool ? (b ? 1 : 0) : i; }
  double as_double() const { return kind == Kind::Float ? f : static_cast<double>(as_int()); }
  // Raises the Undefined's error (jinja2's UndefinedError) when this value is undefined.
  void require_defined() const;

 private:
  void release();
};

// A dict in insertion order with Python's key equality (1 == 1.0 == True).
class Object {
 public:
  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const;
  void set(Value key, Value v);
  const std::vector<std::pair<Value, Value>>& items() const { return items_; }
  size_t size() const { return items_.size(); }

 private:
  std::vector<std::pair<Value, Value>> items_;
  std::unordered_map<std::string, size_t> index_;
};

struct Namespace {
  Object attrs;
};

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

class Interp;
struct Callable {
  std::string name;
  std::function<Value(Interp&, CallArgs&)> call;
  bool unsafe = false;  // a mutating method: the sandbox refuses to call it
};

// Guards recursion over nested values (repr, comparisons, tojson) so self-referencing or
// deeply nested data ends in an error instead of exhausting the stack.
struct RecursionGuard {
  RecursionGuard();
  ~RecursionGuard();
  // Bounds the total number of values visited (per thread) until the next call; a render
  // sets it so shared sub-structures cannot blow up the work exponentially.
  static void set_budget(uint64_t visits);
};

// Python's type name, as error messages spell it ('str', 'dict', 'NoneType', ...).
std::string type_name(const Value& v);
bool truthy(const Value& v);
bool equal(const Value& a, const Value& b);
// a < b with Python's rules; throws EvalError for unorderable types.
bool less(const Value& a, const Value& b);
// str(v) and repr(v) as Python prints them.
std::string py_str(const Value& v);
std::string py_repr(const Value& v);
// float.__repr__: the shortest round-trip digits, exponent form outside 1e-4 <= |x| < 1e16.
std::string float_repr(double x);
// The key under which Python would hash v; throws for unhashable lists and dicts.
std::string hash_key(const Value& v);
// The items `for x in v` visits: list items, dict keys, string characters; undefined is empty.
Array iterate(const Value& v);
// len(v): code points of a string, items of a list or dict; undefined has length 0.
int64_t length(const Value& v);

}  // namespace invar::chat
