// Python methods of str, dict and list that templates call (`content.strip()`,
// `message.get('x')`); the mutating ones exist but the sandbox refuses to call them.
#include <functional>
#include <optional>

#include "chat/builtins.h"
#include "chat/eval.h"
#include "chat/py_string.h"

namespace invar::chat {

Bound bind_args(const CallArgs& args, std::initializer_list<const char*> names, const char* fn) {
  Bound b;
  b.v.assign(names.size(), nullptr);
  if (args.pos.size() > names.size()) {
    throw EvalError(std::string("TypeError: ") + fn + "() takes at most " +
                    std::to_string(names.size()) + " argument(s) (" +
                    std::to_string(args.pos.size()) + " given)");
  }
  for (size_t k = 0; k < args.pos.size(); ++k) b.v[k] = &args.pos[k];
  for (const auto& [key, v] : args.kw) {
    size_t k = 0;
    for (const char* n : names) {
      if (key == n) break;
      ++k;
    }
    if (k == names.size()) {
      throw EvalError(std::string("TypeError: ") + fn + "() got an unexpected keyword argument '" +
                      key + "'");
    }
    if (b.v[k]) {
      throw EvalError(std::string("TypeError: ") + fn + "() got multiple values for argument '" +
                      key + "'");
    }
    b.v[k] = &v;
  }
  return b;
}

namespace {

using Method = std::function<Value(Interp&, const Value& self, CallArgs&)>;

std::optional<std::string> opt_str(const Value* v, const char* what) {
  if (!v || v->is_none()) return std::nullopt;
  if (!v->is_string()) throw EvalError(std::string("TypeError: ") + what + " must be str or None");
  return v->str();
}

long opt_int(const Value* v, long dflt) {
  if (!v || v->is_none()) return dflt;
  if (!v->is_integral()) throw EvalError("TypeError: an integer is required");
  return static_cast<long>(v->as_int());
}

const std::string& need_str(const Value* v, const char* fn) {
  if (!v)
    throw EvalError(std::string("TypeError: ") + fn + "() takes at least 1 argument (0 given)");
  if (!v->is_string()) {
    throw EvalError(std::string("TypeError: ") + fn + "() argument must be str, not " +
                    type_name(*v));
  }
  return v->str();
}

Value str_list(Interp& in, const std::vector<std::string>& parts) {
  Array a;
  a.reserve(parts.size());
  for (const auto& p : parts) a.push_back(in.make_string(p));
  return in.make_list(std::move(a));
}

// startswith/endswith: a prefix or a tuple of prefixes.
Value affix(const Value& self, CallArgs& args, bool at_end, const char* fn) {
  const Bound b = bind_args(args, {"prefix", "start", "end"}, fn);
  if (b[1] || b[2]) throw EvalError(std::string(fn) + "() with start/end is not supported");
  std::vector<std::string> options;
  if (b[0] && b[0]->is_list() && b[0]->flag) {
    for (const Value& v : *b[0]->list) options.push_back(need_str(&v, fn));
  } else {
    options.push_back(need_str(b[0], fn));
  }
  const std::string& s = self.str();
  for (const auto& o : options) {
    if (o.size() <= s.size() && s.compare(at_end ? s.size() - o.size() : 0, o.size(), o) == 0) {
      return Value::boolean(true);
    }
  }
  return Value::boolean(false);
}

Value string_method(Interp& in, const std::string& name, const Value& self, CallArgs& args) {
  const std::string& s = self.str();
  const bool mk = self.flag;  // Markup methods return Markup
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const Bound b = bind_args(args, {"chars"}, name.c_str());
    return in.make_string(py_strip(s, opt_str(b[0], "chars"), name != "rstrip", name != "lstrip"),
                          mk);
  }
  if (name == "split" || name == "rsplit") {
    const Bound b = bind_args(args, {"sep", "maxsplit"}, name.c_str());
    return str_list(in, py_split(s, opt_str(b[0], "sep"), opt_int(b[1], -1), name == "rsplit"));
  }
  if (name == "splitlines") return str_list(in, py_splitlines(s));
  if (name == "startswith") return affix(self, args, false, "startswith");
  if (name == "endswith") return affix(self, args, true, "endswith");
  if (name == "replace") {
    const Bound b = bind_args(args, {"old", "new", "count"}, "replace");
    const std::string& from = need_str(b[0], "replace");
    const std::string& to = need_str(b[1], "replace");
    const long count = opt_int(b[2], -1);
    const uint64_t hits = static_cast<uint64_t>(py_count(s, from));
    if (to.size() > from.size() && hits * (to.size() - from.size()) > in.max_string_bytes()) {
      throw EvalError("string longer than the limit");
    }
    return in.make_string(py_replace(s, from, to, count), mk);
  }
  if (name == "upper") return in.make_string(py_upper_str(s), mk);
  if (name == "lower") return in.make_string(py_lower_str(s), mk);
  if (name == "title") return in.make_string(py_title(s), mk);
  if (name == "capitalize") return in.make_string(py_capitalize(s), mk);
  if (name == "find" || name == "rfind" || name == "index" || name == "count") {
    const Bound b = bind_args(args, {"sub"}, name.c_str());
    const std::string& sub = need_str(b[0], name.c_str());
    if (name == "count") return Value::integer(py_count(s, sub));
    long at;
    if (name == "rfind") {
      const size_t p = s.rfind(sub);
      at = p == std::string::npos
               ? -1
               : static_cast<long>(utf8_length(std::string_view(s).substr(0, p)));
    } else {
      at = py_find(s, sub);
    }
    if (at < 0 && name == "index") throw EvalError("ValueError: substring not found");
    return Value::integer(at);
  }
  if (name == "format") return in.make_string(py_format(in, s, args), mk);
  if (name == "join") {
    const Bound b = bind_args(args, {"iterable"}, "join");
    if (!b[0]) throw EvalError("TypeError: join() takes exactly one argument (0 given)");
    std::string out;
    bool first = true;
    for (const Value& v : iterate(*b[0])) {
      if (!v.is_string()) {
        throw EvalError("TypeError: sequence item: expected str instance, " + type_name(v) +
                        " found");
      }
      if (!first) out += s;
      first = false;
      out += v.str();
      if (out.size() > in.max_string_bytes()) throw EvalError("string longer than the limit");
    }
    return in.make_string(std::move(out), mk);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const Bound b = bind_args(args, {"affix"}, name.c_str());
    const std::string& a = need_str(b[0], name.c_str());
    if (name == "removeprefix") {
      return in.make_string(s.compare(0, a.size(), a) == 0 ? s.substr(a.size()) : s, mk);
    }
    const bool ends = a.size() <= s.size() && s.compare(s.size() - a.size(), a.size(), a) == 0;
    return in.make_string(ends && !a.empty() ? s.substr(0, s.size() - a.size()) : s, mk);
  }
  // isdigit, isalpha, isalnum, isspace, islower, isupper
  bind_args(args, {}, name.c_str());
  const std::u32string u = utf8_decode(s);
  if (u.empty()) return Value::boolean(false);
  bool all = true, cased = false;
  for (char32_t c : u) {
    if (name == "isdigit") all = all && c >= '0' && c <= '9';
    if (name == "isalpha") all = all && py_isalnum(c) && !(c >= '0' && c <= '9');
    if (name == "isalnum") all = all && py_isalnum(c);
    if (name == "isspace") all = all && py_isspace(c);
    if (name == "islower" && py_iscased(c)) all = all && py_lower(c) == c;
    if (name == "isupper" && py_iscased(c)) all = all && py_upper(c) == c;
    cased = cased || py_iscased(c);
  }
  if (name == "islower" || name == "isupper") return Value::boolean(all && cased);
  return Value::boolean(all);
}

Value dict_method(Interp& in, const std::string& name, const Value& self, CallArgs& args) {
  const Object& d = *self.dict;
  if (name == "get") {
    const Bound b = bind_args(args, {"key", "default"}, "get");
    if (!b[0]) throw EvalError("TypeError: get expected at least 1 argument, got 0");
    if (const Value* v = d.find(*b[0])) return *v;
    return b[1] ? *b[1] : Value::none();
  }
  bind_args(args, {}, name.c_str());
  Array out;
  out.reserve(d.size());
  for (const auto& [k, v] : d.items()) {
    if (name == "items") {
      out.push_back(Value::array({k, v}, true));
    } else {
      out.push_back(name == "keys" ? k : v);
    }
  }
  if (name == "copy") return self;
  return in.make_list(std::move(out));
}

Value list_method(Interp&, const std::string& name, const Value& self, CallArgs& args) {
  const Bound b = bind_args(args, {"value"}, name.c_str());
  if (!b[0]) throw EvalError("TypeError: " + name + "() takes exactly one argument (0 given)");
  int64_t n = 0;
  for (size_t k = 0; k < self.list->size(); ++k) {
    if (!equal((*self.list)[k], *b[0])) continue;
    if (name == "index") return Value::integer(static_cast<int64_t>(k));
    ++n;
  }
  if (name == "index") throw EvalError("ValueError: value is not in list");
  return Value::integer(n);
}

bool one_of(const std::string& name, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (name == n) return true;
  }
  return false;
}

Value bind(const Value& self, const std::string& name,
           Value (*fn)(Interp&, const std::string&, const Value&, CallArgs&)) {
  auto c = std::make_shared<Callable>();
  c->name = name;
  c->call = [self, name, fn](Interp& in, CallArgs& args) { return fn(in, name, self, args); };
  return Value::callable(std::move(c));
}

Value unsafe(const std::string& name) {
  auto c = std::make_shared<Callable>();
  c->name = name;
  c->unsafe = true;
  return Value::callable(std::move(c));
}

}  // namespace

Value get_method(const Value& obj, const std::string& name) {
  if (obj.is_string() &&
      one_of(
          name,
          {"strip",    "lstrip",  "rstrip",  "split",   "rsplit",  "splitlines",   "startswith",
           "endswith", "replace", "upper",   "lower",   "title",   "capitalize",   "find",
           "rfind",    "index",   "count",   "format",  "join",    "removeprefix", "removesuffix",
           "isdigit",  "isalpha", "isalnum", "isspace", "islower", "isupper"})) {
    return bind(obj, name, string_method);
  }
  if (obj.is_dict()) {
    if (one_of(name, {"items", "keys", "values", "get", "copy"}))
      return bind(obj, name, dict_method);
    if (one_of(name, {"pop", "popitem", "update", "setdefault", "clear"})) return unsafe(name);
  }
  if (obj.is_list()) {
    if (one_of(name, {"index", "count"})) return bind(obj, name, list_method);
    if (!obj.flag &&
        one_of(name, {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"})) {
      return unsafe(name);
    }
  }
  return Value::undefined("no method");
}

}  // namespace invar::chat
