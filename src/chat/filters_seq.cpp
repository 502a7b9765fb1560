// Filters over sequences and mappings: first/last/join/map/select/sort/unique/...
#include <algorithm>
#include <unordered_set>

#include "chat/filters_impl.h"
#include "chat/py_string.h"

namespace invar::chat::filters {

Value attr_path(Interp& in, const Value& item, const Value& attribute) {
  if (!attribute.is_string()) return get_item(in, item, attribute);
  Value cur = item;
  for (const std::string& part : py_split(attribute.str(), std::string("."), -1, false)) {
    const bool digits =
        !part.empty() && part.size() < 18 &&
        std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    cur = get_item(in, cur, digits ? Value::integer(std::stoll(part)) : Value::string(part));
  }
  return cur;
}

Value f_first(Interp&, const Value& v, CallArgs& a) {
  bind_args(a, {}, "first");
  const Array items = iterate(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Interp&, const Value& v, CallArgs& a) {
  bind_args(a, {}, "last");
  const Array items = iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value f_join(Interp& in, const Value& v, CallArgs& a) {
  const Bound b = bind_args(a, {"d", "attribute"}, "join");
  const std::string sep = b[0] ? py_str(*b[0]) : "";
  std::string out;
  bool first = true;
  for (const Value& x : iterate(v)) {
    in.step();
    if (!first) out += sep;
    first = false;
    out += py_str(b[1] ? attr_path(in, x, *b[1]) : x);
    if (out.size() > in.max_string_bytes()) throw EvalError("string longer than the limit");
  }
  return in.make_string(std::move(out));
}

Value f_list(Interp& in, const Value& v, CallArgs& a) {
  bind_args(a, {}, "list");
  return in.make_list(iterate(v));
}

Value f_items(Interp& in, const Value& v, CallArgs& a) {
  bind_args(a, {}, "items");
  if (v.is_undefined()) return in.make_list({});
  if (!v.is_dict()) throw EvalError("TypeError: Can only get item pairs from a mapping.");
  Array out;
  for (const auto& [k, x] : v.dict->items()) out.push_back(Value::array({k, x}, true));
  return in.make_list(std::move(out));
}

Value f_map(Interp& in, const Value& v, CallArgs& a) {
  // jinja2's do_map starts with `if value:`: a falsy value (none, as tools are without any)
  // maps to nothing, before its arguments are looked at.
  if (!truthy(v)) return in.make_list({});
  const Value* attribute = nullptr;
  const Value* dflt = nullptr;
  for (const auto& [k, x] : a.kw) {
    if (k == "attribute") {
      attribute = &x;
    } else if (k == "default") {
      dflt = &x;
    } else if (attribute || a.pos.empty()) {
      throw EvalError("Unexpected keyword argument '" + k + "'");
    }
  }
  Array out;
  if (attribute) {
    for (const Value& x : iterate(v)) {
      in.step();
      Value r = attr_path(in, x, *attribute);
      out.push_back(r.is_undefined() && dflt ? *dflt : r);
    }
    return in.make_list(std::move(out));
  }
  if (a.pos.empty() || !a.pos[0].is_string()) throw EvalError("map requires a filter argument");
  const std::string name = a.pos[0].str();
  CallArgs rest;
  rest.pos.assign(a.pos.begin() + 1, a.pos.end());
  rest.kw = a.kw;
  for (const Value& x : iterate(v)) {
    in.step();
    CallArgs copy = rest;
    out.push_back(in.apply_filter(name, x, copy));
  }
  return in.make_list(std::move(out));
}

namespace {

// select/reject/selectattr/rejectattr: keep items whose test (or truthiness) equals `keep`.
Value select_impl(Interp& in, const Value& v, CallArgs& a, bool by_attr, bool keep) {
  if (!truthy(v)) return in.make_list({});  // jinja2's select_or_reject: `if value:`
  size_t k = 0;
  Value attribute;
  if (by_attr) {
    if (a.pos.empty()) throw EvalError("Missing parameter for attribute name");
    attribute = a.pos[k++];
  }
  std::string test;
  if (k < a.pos.size()) test = py_str(a.pos[k++]);
  CallArgs targs;
  targs.pos.assign(a.pos.begin() + static_cast<long>(k), a.pos.end());
  targs.kw = a.kw;
  if (!test.empty() && !find_test(test)) throw EvalError("No test named '" + test + "'.");
  Array out;
  for (const Value& x : iterate(v)) {
    in.step();
    const Value subject = by_attr ? attr_path(in, x, attribute) : x;
    CallArgs copy = targs;
    const bool r = test.empty() ? truthy(subject) : in.apply_test(test, subject, copy);
    if (r == keep) out.push_back(x);
  }
  return in.make_list(std::move(out));
}

Value sort_key(Interp& in, const Value& x, const Value* attribute, bool case_sensitive) {
  Value k = attribute ? attr_path(in, x, *attribute) : x;
  if (!case_sensitive && k.is_string()) return Value::string(py_lower_str(k.str()));
  return k;
}

}  // namespace

Value f_select(Interp& in, const Value& v, CallArgs& a) {
  return select_impl(in, v, a, false, true);
}
Value f_reject(Interp& in, const Value& v, CallArgs& a) {
  return select_impl(in, v, a, false, false);
}
Value f_selectattr(Interp& in, const Value& v, CallArgs& a) {
  return select_impl(in, v, a, true, true);
}
Value f_rejectattr(Interp& in, const Value& v, CallArgs& a) {
  return select_impl(in, v, a, true, false);
}

Value f_unique(Interp& in, const Value& v, CallArgs& a) {
  const Bound b = bind_args(a, {"case_sensitive", "attribute"}, "unique");
  std::unordered_set<std::string> seen;
  Array out;
  for (const Value& x : iterate(v)) {
    in.step();
    const std::string key = hash_key(sort_key(in, x, b[1], flag(b[0])));
    if (!seen.insert(key).second) continue;
    out.push_back(x);
  }
  return in.make_list(std::move(out));
}

Value f_sort(Interp& in, const Value& v, CallArgs& a) {
  const Bound b = bind_args(a, {"reverse", "case_sensitive", "attribute"}, "sort");
  Array items = iterate(v);
  std::vector<std::pair<Value, size_t>> keys;
  for (size_t k = 0; k < items.size(); ++k) {
    in.step();
    keys.emplace_back(sort_key(in, items[k], b[2], flag(b[1])), k);
  }
  const bool rev = flag(b[0]);
  std::stable_sort(keys.begin(), keys.end(), [&](const auto& x, const auto& y) {
    in.step();
    return rev ? less(y.first, x.first) : less(x.first, y.first);
  });
  Array out;
  for (const auto& [key, k] : keys) out.push_back(items[k]);
  return in.make_list(std::move(out));
}

Value f_dictsort(Interp& in, const Value& v, CallArgs& a) {
  const Bound b = bind_args(a, {"case_sensitive", "by", "reverse"}, "dictsort");
  if (!v.is_dict())
    throw EvalError("AttributeError: '" + type_name(v) + "' object has no attribute 'items'");
  const std::string by = b[1] ? py_str(*b[1]) : "key";
  if (by != "key" && by != "value")
    throw EvalError("FilterArgumentError: You can only sort by either 'key' or 'value'");
  const size_t pos = by == "key" ? 0 : 1;
  Array pairs;
  for (const auto& [k, x] : v.dict->items()) pairs.push_back(Value::array({k, x}, true));
  const bool cs = flag(b[0]), rev = flag(b[2]);
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
    in.step();
    const Value kx = sort_key(in, (*x.list)[pos], nullptr, cs);
    const Value ky = sort_key(in, (*y.list)[pos], nullptr, cs);
    return rev ? less(ky, kx) : less(kx, ky);
  });
  return in.make_list(std::move(pairs));
}

Value f_batch(Interp& in, const Value& v, CallArgs& a) {
  const Bound b = bind_args(a, {"linecount", "fill_with"}, "batch");
  if (!b[0] || !b[0]->is_integral() || b[0]->as_int() <= 0) {
    throw EvalError("batch needs a positive line count");
  }
  const size_t n = static_cast<size_t>(b[0]->as_int());
  Array out, cur;
  for (const Value& x : iterate(v)) {
    in.step();
    cur.push_back(x);
    if (cur.size() == n) {
      out.push_back(in.make_list(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (b[1] && !b[1]->is_none()) {
      while (cur.size() < n) cur.push_back(*b[1]);
    }
    out.push_back(in.make_list(std::move(cur)));
  }
  return in.make_list(std::move(out));
}

Value f_reverse(Interp& in, const Value& v, CallArgs& a) {
  bind_args(a, {}, "reverse");
  if (v.is_string()) {
    std::u32string u = utf8_decode(v.str());
    std::reverse(u.begin(), u.end());
    return in.make_string(utf8_encode(u));
  }
  Array items = iterate(v);
  std::reverse(items.begin(), items.end());
  return in.make_list(std::move(items));
}

Value f_sum(Interp& in, const Value& v, CallArgs& a) {
  const Bound b = bind_args(a, {"attribute", "start"}, "sum");
  Value acc = b[1] ? *b[1] : Value::integer(0);
  for (const Value& x : iterate(v)) {
    in.step();
    acc = binary_op(in, "+", acc, b[0] ? attr_path(in, x, *b[0]) : x);
  }
  return acc;
}

static Value min_max(Interp& in, const Value& v, CallArgs& a, bool want_max) {
  const Bound b = bind_args(a, {"case_sensitive", "attribute"}, want_max ? "max" : "min");
  const Array items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = sort_key(in, items[0], b[1], flag(b[0]));
  for (size_t k = 1; k < items.size(); ++k) {
    in.step();
    const Value key = sort_key(in, items[k], b[1], flag(b[0]));
    if (want_max ? less(best_key, key) : less(key, best_key)) {
      best = k;
      best_key = key;
    }
  }
  return items[best];
}

Value f_min(Interp& in, const Value& v, CallArgs& a) {
  return min_max(in, v, a, false);
}
Value f_max(Interp& in, const Value& v, CallArgs& a) {
  return min_max(in, v, a, true);
}

}  // namespace invar::chat::filters
