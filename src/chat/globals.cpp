// Globals of the environment transformers builds: jinja2's range/namespace/dict/joiner plus
// raise_exception(msg) and strftime_now(fmt).
#include <cctype>

#include "chat/builtins.h"
#include "chat/eval.h"
#include "chat/template_error.h"

namespace invar::chat {
namespace {

// jinja2's sandbox refuses ranges longer than this (sandbox.MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

Value range_fn(Interp& in, CallArgs& args) {
  if (!args.kw.empty()) throw EvalError("TypeError: range() takes no keyword arguments");
  if (args.pos.empty() || args.pos.size() > 3) {
    throw EvalError("TypeError: range expected 1 to 3 arguments");
  }
  for (const Value& v : args.pos) {
    if (!v.is_integral()) {
      throw EvalError("TypeError: '" + type_name(v) +
                      "' object cannot be interpreted as an integer");
    }
  }
  const int64_t start = args.pos.size() == 1 ? 0 : args.pos[0].as_int();
  const int64_t stop = args.pos.size() == 1 ? args.pos[0].as_int() : args.pos[1].as_int();
  const int64_t step = args.pos.size() == 3 ? args.pos[2].as_int() : 1;
  if (step == 0) throw EvalError("ValueError: range() arg 3 must not be zero");
  const long double count_ld =
      step > 0 ? (stop > start ? (static_cast<long double>(stop) - start + step - 1) / step : 0)
               : (stop < start ? (static_cast<long double>(start) - stop - step - 1) / -step : 0);
  const int64_t count = static_cast<int64_t>(count_ld);
  if (count > kMaxRange) {
    throw EvalError(
        "OverflowError: Range too big. The sandbox blocks ranges larger than "
        "MAX_RANGE (100000).");
  }
  Array out;
  out.reserve(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) out.push_back(Value::integer(start + k * step));
  return in.make_list(std::move(out));
}

// dict(*args, **kwargs) as Python builds it: a mapping or pairs, then keyword items.
Object dict_from(const CallArgs& args, const char* fn) {
  if (args.pos.size() > 1) {
    throw EvalError(std::string("TypeError: ") + fn + " expected at most 1 argument");
  }
  Object o;
  if (!args.pos.empty()) {
    const Value& a = args.pos[0];
    if (a.is_dict()) {
      o = *a.dict;
    } else {
      for (const Value& pair : iterate(a)) {
        const Array kv = iterate(pair);
        if (kv.size() != 2) {
          throw EvalError("ValueError: dictionary update sequence element has wrong length");
        }
        o.set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : args.kw) o.set(Value::string(k), v);
  return o;
}

Value namespace_fn(Interp& in, CallArgs& args) {
  return in.make_namespace(dict_from(args, "namespace"));
}

Value dict_fn(Interp&, CallArgs& args) {
  return Value::object(dict_from(args, "dict"));
}

Value raise_exception_fn(Interp&, CallArgs& args) {
  const std::string msg = args.pos.empty() ? "" : py_str(args.pos[0]);
  throw TemplateError(TemplateError::Kind::Raised, msg, 0, 0);
}

Value strftime_now_fn(Interp& in, CallArgs& args) {
  const Bound b = bind_args(args, {"format"}, "strftime_now");
  if (!b[0] || !b[0]->is_string())
    throw EvalError("TypeError: strftime_now() needs a format string");
  return in.strftime_now(b[0]->str());
}

Value joiner_fn(Interp&, CallArgs& args) {
  const Bound b = bind_args(args, {"sep"}, "joiner");
  const std::string sep = b[0] ? py_str(*b[0]) : ", ";
  auto used = std::make_shared<bool>(false);
  auto c = std::make_shared<Callable>();
  c->name = "joiner";
  c->call = [sep, used](Interp&, CallArgs&) -> Value {
    if (!*used) {
      *used = true;
      return Value::string("");
    }
    return Value::string(sep);
  };
  return Value::callable(std::move(c));
}

Value make_global(const char* name, Value (*fn)(Interp&, CallArgs&)) {
  auto c = std::make_shared<Callable>();
  c->name = name;
  c->call = fn;
  return Value::callable(std::move(c));
}

}  // namespace

Value global_function(const std::string& name) {
  static const std::vector<std::pair<std::string, Value>> globals = {
      {"range", make_global("range", range_fn)},
      {"namespace", make_global("namespace", namespace_fn)},
      {"dict", make_global("dict", dict_fn)},
      {"raise_exception", make_global("raise_exception", raise_exception_fn)},
      {"strftime_now", make_global("strftime_now", strftime_now_fn)},
      {"joiner", make_global("joiner", joiner_fn)},
  };
  for (const auto& [n, v] : globals) {
    if (n == name) return v;
  }
  return Value::undefined("'" + name + "' is undefined");
}

std::string py_format(Interp& in, const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t k = 0; k < fmt.size(); ++k) {
    const char c = fmt[k];
    if (c == '}') {
      if (k + 1 < fmt.size() && fmt[k + 1] == '}') {
        out.push_back('}');
        ++k;
        continue;
      }
      throw EvalError("ValueError: Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (k + 1 < fmt.size() && fmt[k + 1] == '{') {
      out.push_back('{');
      ++k;
      continue;
    }
    const size_t close = fmt.find('}', k);
    if (close == std::string::npos) {
      throw EvalError("ValueError: Single '{' encountered in format string");
    }
    std::string field = fmt.substr(k + 1, close - k - 1);
    k = close;
    char conv = 0;
    if (const size_t colon = field.find(':'); colon != std::string::npos) {
      if (colon + 1 != field.size()) throw EvalError("str.format: format specs are not supported");
      field.resize(colon);
    }
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      conv = bang + 1 < field.size() ? field[bang + 1] : 0;
      field.resize(bang);
    }
    const Value* v = nullptr;
    if (field.empty() || std::isdigit(static_cast<unsigned char>(field[0]))) {
      size_t idx = auto_index;
      if (field.empty()) {
        ++auto_index;
      } else {
        if (field.size() > 9 || field.find_first_not_of("0123456789") != std::string::npos) {
          throw EvalError("ValueError: bad format field '" + field + "'");
        }
        idx = static_cast<size_t>(std::stoul(field));
      }
      if (idx >= args.pos.size()) {
        throw EvalError("IndexError: Replacement index " + std::to_string(idx) +
                        " out of range for positional args tuple");
      }
      v = &args.pos[idx];
    } else {
      for (const auto& [key, val] : args.kw) {
        if (key == field) v = &val;
      }
      if (!v) throw EvalError("KeyError: '" + field + "'");
    }
    out += conv == 'r' ? py_repr(*v) : py_str(*v);
    if (out.size() > in.max_string_bytes()) throw EvalError("string longer than the limit");
  }
  return out;
}

}  // namespace invar::chat
