// The `tojson` filter as transformers defines it: Python's json.dumps(x, ensure_ascii=False,
// indent=..., separators=..., sort_keys=...), byte for byte.
#include <algorithm>
#include <cstdio>

#include "chat/builtins.h"
#include "chat/py_string.h"

namespace invar::chat {
namespace {

struct Dumper {
  std::string indent;  // per level
  bool pretty = false;
  std::string item_sep, key_sep;
  bool sort_keys = false, ensure_ascii = false;
  size_t max_bytes = 0;
  std::string out;

  void string(const std::string& s) {
    out.push_back('"');
    char buf[16];
    for (char32_t c : utf8_decode(s)) {
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        case '\b':
          out += "\\b";
          break;
        case '\f':
          out += "\\f";
          break;
        default:
          if (c < 0x20) {
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
            out += buf;
          } else if (ensure_ascii && c > 0x7E && !(c >= 0xDC80 && c <= 0xDCFF)) {
            if (c >= 0x10000) {
              const char32_t v = c - 0x10000;
              std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x",
                            static_cast<unsigned>(0xD800 + (v >> 10)),
                            static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
            } else {
              std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
            }
            out += buf;
          } else {
            utf8_append(out, c);
          }
      }
    }
    out.push_back('"');
  }

  std::string key_text(const Value& k) {
    switch (k.kind) {
      case Kind::String:
        return k.str();
      case Kind::Bool:
        return k.b ? "true" : "false";
      case Kind::None:
        return "null";
      case Kind::Int:
        return std::to_string(k.i);
      case Kind::Float:
        return float_text(k.f);
      default:
        throw EvalError("TypeError: keys must be str, int, float, bool or None, not " +
                        type_name(k));
    }
  }

  static std::string float_text(double f) {
    if (f != f) return "NaN";
    if (f == 1.0 / 0.0) return "Infinity";
    if (f == -1.0 / 0.0) return "-Infinity";
    return float_repr(f);
  }

  void newline(int level) {
    out.push_back('\n');
    for (int k = 0; k < level; ++k) out += indent;
  }

  void value(const Value& v, int level) {
    RecursionGuard guard;
    if (out.size() > max_bytes) throw EvalError("tojson result longer than the limit");
    switch (v.kind) {
      case Kind::None:
        out += "null";
        return;
      case Kind::Bool:
        out += v.b ? "true" : "false";
        return;
      case Kind::Int:
        out += std::to_string(v.i);
        return;
      case Kind::Float:
        out += float_text(v.f);
        return;
      case Kind::String:
        string(v.str());
        return;
      case Kind::List: {
        if (v.list->empty()) {
          out += "[]";
          return;
        }
        out.push_back('[');
        if (pretty) newline(level + 1);
        for (size_t k = 0; k < v.list->size(); ++k) {
          if (k) {
            out += item_sep;
            if (pretty) newline(level + 1);
          }
          value((*v.list)[k], level + 1);
        }
        if (pretty) newline(level);
        out.push_back(']');
        return;
      }
      case Kind::Dict: {
        if (v.dict->size() == 0) {
          out += "{}";
          return;
        }
        std::vector<const std::pair<Value, Value>*> items;
        for (const auto& kv : v.dict->items()) items.push_back(&kv);
        if (sort_keys) {
          std::stable_sort(items.begin(), items.end(),
                           [](const auto* a, const auto* b) { return less(a->first, b->first); });
        }
        out.push_back('{');
        if (pretty) newline(level + 1);
        bool first = true;
        for (const auto* kv : items) {
          if (!first) {
            out += item_sep;
            if (pretty) newline(level + 1);
          }
          first = false;
          string(key_text(kv->first));
          out += key_sep;
          value(kv->second, level + 1);
        }
        if (pretty) newline(level);
        out.push_back('}');
        return;
      }
      default:
        throw EvalError("TypeError: Object of type " + type_name(v) + " is not JSON serializable");
    }
  }
};

}  // namespace

std::string tojson(const Value& v, const Value* indent, const Value* separators, bool sort_keys,
                   bool ensure_ascii, size_t max_bytes) {
  Dumper d;
  d.max_bytes = max_bytes;
  d.sort_keys = sort_keys;
  d.ensure_ascii = ensure_ascii;
  if (indent && !indent->is_none()) {
    d.pretty = true;
    if (indent->is_string()) {
      d.indent = indent->str();
    } else if (indent->is_integral()) {
      d.indent =
          std::string(static_cast<size_t>(std::clamp<int64_t>(indent->as_int(), 0, 1024)), ' ');
    } else {
      throw EvalError("TypeError: indent must be an int or a string");
    }
  }
  d.item_sep = d.pretty ? "," : ", ";
  d.key_sep = ": ";
  if (separators && !separators->is_none()) {
    if (!separators->is_list() || separators->list->size() != 2 ||
        !(*separators->list)[0].is_string() || !(*separators->list)[1].is_string()) {
      throw EvalError("ValueError: separators must be a pair of strings");
    }
    d.item_sep = (*separators->list)[0].str();
    d.key_sep = (*separators->list)[1].str();
  }
  d.value(v, 0);
  return std::move(d.out);
}

}  // namespace invar::chat
