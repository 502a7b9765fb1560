#include "grammar/json_schema.h"

#include <cmath>
#include <map>
#include <set>

#include "grammar/codepoints.h"
#include "grammar/error.h"
#include "grammar/json_formats.h"
#include "grammar/json_numbers.h"
#include "grammar/regex.h"

namespace invar::grammar {

namespace {

using json = nlohmann::ordered_json;

// Keywords that carry no assertion: accepted and ignored.
const std::set<std::string> kAnnotations = {"title",    "description", "examples", "default",
                                            "$schema",  "$id",         "$comment", "deprecated",
                                            "readOnly", "writeOnly",   "$defs",    "definitions"};
// Every assertion keyword the compiler enforces; any other keyword is refused.
const std::set<std::string> kEnforced = {"type",
                                         "properties",
                                         "required",
                                         "additionalProperties",
                                         "items",
                                         "prefixItems",
                                         "minItems",
                                         "maxItems",
                                         "enum",
                                         "const",
                                         "anyOf",
                                         "oneOf",
                                         "allOf",
                                         "$ref",
                                         "minLength",
                                         "maxLength",
                                         "pattern",
                                         "format",
                                         "minimum",
                                         "maximum",
                                         "exclusiveMinimum",
                                         "exclusiveMaximum"};

const std::set<std::string> kObjectKeys = {"properties", "required", "additionalProperties"};
const std::set<std::string> kArrayKeys = {"items", "prefixItems", "minItems", "maxItems"};
const std::set<std::string> kStringKeys = {"minLength", "maxLength", "pattern", "format"};
const std::set<std::string> kNumberKeys = {"minimum", "maximum", "exclusiveMinimum",
                                           "exclusiveMaximum"};

// Type bits for oneOf's overlap check.
enum : uint32_t {
  kNull = 1,
  kBool = 2,
  kInt = 4,
  kFrac = 8,  // a number that is not an integer
  kString = 16,
  kArray = 32,
  kObject = 64,
  kAll = 127
};

uint32_t type_bit(const std::string& t) {
  if (t == "null") return kNull;
  if (t == "boolean") return kBool;
  if (t == "integer") return kInt;
  if (t == "number") return kInt | kFrac;
  if (t == "string") return kString;
  if (t == "array") return kArray;
  if (t == "object") return kObject;
  return 0;
}

uint32_t value_bits(const json& v) {
  if (v.is_null()) return kNull;
  if (v.is_boolean()) return kBool;
  if (v.is_number_integer() || v.is_number_unsigned()) return kInt;
  if (v.is_number_float()) {
    const double d = v.get<double>();
    return std::floor(d) == d ? kInt : kFrac;
  }
  if (v.is_string()) return kString;
  if (v.is_array()) return kArray;
  return kObject;
}

// Compact JSON in the grammar's canonical form (key order as given, strings as json_escape).
std::string serialize(const json& v) {
  if (v.is_string()) return "\"" + json_escape(v.get_ref<const std::string&>()) + "\"";
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + serialize(v[i]);
    return out + "]";
  }
  if (v.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, x] : v.items()) {
      out += (first ? "\"" : ",\"") + json_escape(k) + "\":" + serialize(x);
      first = false;
    }
    return out + "}";
  }
  return v.dump();
}

std::string pointer_escape(const std::string& k) {
  std::string out;
  for (char c : k) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

class SchemaCompiler {
 public:
  SchemaCompiler(Builder& b, const json& root) : b_(b), root_(root) {}

  RuleId run(const std::string& root_name) {
    const RuleId r = root_name == "root" ? b_.rule("root") : b_.fresh_rule(root_name);
    b_.define(r, compile(root_, "", 0));
    while (!pending_.empty()) {
      auto [ptr, rule] = pending_.back();
      pending_.pop_back();
      b_.define(rule, compile(resolve(ptr, ptr), ptr, 0));
    }
    return r;
  }

  RuleId any_object_rule() {
    value_rule();
    return object_rule_;
  }

 private:
  [[noreturn]] static void fail(const std::string& path, const std::string& msg) {
    throw Error("json_schema: " + msg + " at " + (path.empty() ? "/" : path));
  }

  // ---- shared rules of unconstrained JSON --------------------------------------------------
  ExprId char_any() {
    if (char_rule_ < 0) {
      char_rule_ = b_.rule("json-char");
      b_.define(char_rule_, json_char_expr(b_, CodepointSet::all()));
    }
    return b_.ref(char_rule_);
  }
  ExprId string_any() {
    if (string_rule_ < 0) {
      string_rule_ = b_.rule("json-string");
      b_.define(string_rule_, b_.seq({b_.byte('"'), b_.star(char_any()), b_.byte('"')}));
    }
    return b_.ref(string_rule_);
  }
  ExprId value_rule() {
    if (value_rule_ < 0) {
      value_rule_ = b_.rule("json-value");
      object_rule_ = b_.rule("json-object");
      const RuleId array = b_.rule("json-array");
      const RuleId number = b_.rule("json-number");
      b_.define(number, number_expr(b_));
      const ExprId value = b_.ref(value_rule_);
      const ExprId member = b_.seq({string_any(), b_.byte(':'), value});
      b_.define(
          object_rule_,
          b_.seq({b_.byte('{'), b_.opt(b_.seq({member, b_.star(b_.seq({b_.byte(','), member}))})),
                  b_.byte('}')}));
      b_.define(array, b_.seq({b_.byte('['),
                               b_.opt(b_.seq({value, b_.star(b_.seq({b_.byte(','), value}))})),
                               b_.byte(']')}));
      b_.define(value_rule_,
                b_.alt({b_.ref(object_rule_), b_.ref(array), string_any(), b_.ref(number),
                        b_.literal("true"), b_.literal("false"), b_.literal("null")}));
    }
    return b_.ref(value_rule_);
  }

  // ---- $ref ----------------------------------------------------------------------------------
  const json& resolve(const std::string& ref, const std::string& path) {
    if (ref.empty() || ref[0] != '#')
      fail(path, "$ref '" + ref + "' is not a local reference (#...)");
    try {
      return root_.at(json::json_pointer(ref.substr(1)));
    } catch (const std::exception&) {
      fail(path, "$ref '" + ref + "' points to nothing in the schema");
    }
  }

  ExprId ref_expr(const std::string& ref, const std::string& path) {
    resolve(ref, path + "/$ref");  // fail early, naming the referring path
    auto it = ref_rules_.find(ref);
    if (it == ref_rules_.end()) {
      const RuleId r = b_.fresh_rule("ref");
      it = ref_rules_.emplace(ref, r).first;
      pending_.push_back({ref, r});
    }
    return b_.ref(it->second);
  }

  // Follows $ref chains to a schema with content, for the analyses below.
  const json& deref(const json& s, const std::string& path) {
    const json* cur = &s;
    for (int i = 0; cur->is_object() && cur->contains("$ref"); ++i) {
      if (i > b_.limits().max_nesting) fail(path, "$ref chain longer than max_nesting");
      cur = &resolve((*cur)["$ref"].get<std::string>(), path);
    }
    return *cur;
  }

  // ---- the schema walk -----------------------------------------------------------------------
  void check_keywords(const json& s, const std::string& path) {
    for (const auto& [k, v] : s.items()) {
      if (kAnnotations.contains(k) || kEnforced.contains(k)) continue;
      fail(path + "/" + pointer_escape(k), "keyword '" + k + "' is not supported");
    }
    if (s.contains("$ref") && !s["$ref"].is_string()) fail(path + "/$ref", "$ref must be a string");
  }

  // Keywords of s other than annotations and those in `allowed`.
  static std::vector<std::string> others(const json& s, const std::set<std::string>& allowed) {
    std::vector<std::string> out;
    for (const auto& [k, v] : s.items()) {
      if (!kAnnotations.contains(k) && !allowed.contains(k)) out.push_back(k);
    }
    return out;
  }

  ExprId compile(const json& s, const std::string& path, int depth) {
    if (depth > b_.limits().max_nesting) {
      throw LimitError("json_schema: schemas nested deeper than " +
                       std::to_string(b_.limits().max_nesting) + " (max_nesting) at " + path);
    }
    if (s.is_boolean()) {
      if (s.get<bool>()) return value_rule();
      fail(path, "the schema false matches nothing");
    }
    if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
    check_keywords(s, path);
    if (s.contains("$ref")) {
      if (auto o = others(s, {"$ref"}); !o.empty())
        fail(path + "/" + o[0], "keyword '" + o[0] + "' beside $ref is not supported");
      return ref_expr(s["$ref"].get<std::string>(), path);
    }
    if (s.contains("allOf")) return all_of(s, path, depth);
    for (const char* k : {"anyOf", "oneOf"}) {
      if (!s.contains(k)) continue;
      if (auto o = others(s, {k}); !o.empty()) {
        fail(path + "/" + o[0], "keyword '" + o[0] + "' beside " + k + " is not supported");
      }
      const json& branches = s[k];
      if (!branches.is_array() || branches.empty())
        fail(path + "/" + k, std::string(k) + " must be a non-empty array");
      if (std::string(k) == "oneOf") check_one_of(branches, path + "/oneOf");
      std::vector<ExprId> alts;
      for (size_t i = 0; i < branches.size(); ++i) {
        alts.push_back(compile(branches[i], path + "/" + k + "/" + std::to_string(i), depth + 1));
      }
      return b_.alt(std::move(alts));
    }
    if (s.contains("enum") || s.contains("const")) return enum_expr(s, path);
    std::vector<ExprId> alts;
    for (const std::string& t : types(s, path)) alts.push_back(typed(s, t, path, depth));
    return b_.alt(std::move(alts));
  }

  std::vector<std::string> types(const json& s, const std::string& path) {
    std::vector<std::string> out;
    if (s.contains("type")) {
      const json& t = s["type"];
      std::vector<std::string> list;
      if (t.is_string()) {
        list.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const auto& x : t) {
          if (!x.is_string()) fail(path + "/type", "type must be a string or an array of strings");
          list.push_back(x.get<std::string>());
        }
      } else {
        fail(path + "/type", "type must be a string or a non-empty array of strings");
      }
      const bool has_number = std::find(list.begin(), list.end(), "number") != list.end();
      for (const auto& x : list) {
        if (!type_bit(x)) fail(path + "/type", "unknown type '" + x + "'");
        if (x == "integer" && has_number) continue;  // number covers it
        if (std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
      }
      return out;
    }
    // No type: any value, but a type-specific keyword only constrains values of its type.
    // Producing only the types the keywords name keeps every output valid and the keywords
    // enforced (an unconstrained type would make them moot).
    auto any_of = [&](const std::set<std::string>& keys) {
      for (const auto& k : keys) {
        if (s.contains(k)) return true;
      }
      return false;
    };
    if (any_of(kObjectKeys)) out.push_back("object");
    if (any_of(kArrayKeys)) out.push_back("array");
    if (any_of(kStringKeys)) out.push_back("string");
    if (any_of(kNumberKeys)) out.push_back("number");
    if (out.empty()) out.push_back("any");
    return out;
  }

  ExprId typed(const json& s, const std::string& t, const std::string& path, int depth) {
    if (t == "any") return value_rule();
    if (t == "null") return b_.literal("null");
    if (t == "boolean") return b_.alt({b_.literal("true"), b_.literal("false")});
    if (t == "integer") return integer(s, path);
    if (t == "number") return number(s, path);
    if (t == "string") return string(s, path);
    if (t == "array") return array(s, path, depth);
    return object(s, path, depth);
  }

  // ---- numbers -------------------------------------------------------------------------------
  struct Bound {
    std::optional<double> v;
    bool inclusive = true;
  };
  // The tighter of the inclusive and the exclusive bound on one side (lower: larger wins).
  Bound bound(const json& s, const char* inc, const char* exc, bool lower,
              const std::string& path) {
    Bound out;
    for (const char* k : {inc, exc}) {
      if (!s.contains(k)) continue;
      const json& v = s[k];
      if (!v.is_number())
        fail(path + "/" + k, std::string(k) + " must be a number (draft 2020-12)");
      const double d = v.get<double>();
      if (!std::isfinite(d) || std::fabs(d) > 9007199254740992.0)
        fail(path + "/" + k, std::string(k) + " is beyond ±2^53");
      const bool is_inc = k == inc;
      if (!out.v || (lower ? d > *out.v : d < *out.v) || (d == *out.v && !is_inc)) {
        out.v = d;
        out.inclusive = is_inc;
      }
    }
    return out;
  }

  ExprId integer(const json& s, const std::string& path) {
    const Bound lo = bound(s, "minimum", "exclusiveMinimum", true, path);
    const Bound hi = bound(s, "maximum", "exclusiveMaximum", false, path);
    std::optional<int64_t> a, z;
    if (lo.v) a = static_cast<int64_t>(lo.inclusive ? std::ceil(*lo.v) : std::floor(*lo.v) + 1);
    if (hi.v) z = static_cast<int64_t>(hi.inclusive ? std::floor(*hi.v) : std::ceil(*hi.v) - 1);
    if (a && z && *a > *z) fail(path, "no integer satisfies the minimum/maximum bounds");
    return integer_range_expr(b_, a, z);
  }

  ExprId number(const json& s, const std::string& path) {
    const Bound lo = bound(s, "minimum", "exclusiveMinimum", true, path);
    const Bound hi = bound(s, "maximum", "exclusiveMaximum", false, path);
    if (!lo.v && !hi.v) return b_.ref(number_rule());
    for (const Bound* x : {&lo, &hi}) {
      if (x->v && std::floor(*x->v) != *x->v) {
        fail(path, "a number bound that is not an integer (" + json(*x->v).dump() +
                       ") is not supported; only integer bounds are");
      }
    }
    std::optional<int64_t> a, z;
    if (lo.v) a = static_cast<int64_t>(*lo.v);
    if (hi.v) z = static_cast<int64_t>(*hi.v);
    const ExprId e = decimal_range_expr(b_, a, lo.inclusive, z, hi.inclusive);
    if (e < 0) fail(path, "no number satisfies the minimum/maximum bounds");
    return e;
  }

  RuleId number_rule() {
    value_rule();
    return b_.rule("json-number");
  }

  // ---- strings -------------------------------------------------------------------------------
  int64_t count(const json& s, const char* k, const std::string& path) {
    const json& v = s[k];
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
      fail(path + "/" + k, std::string(k) + " must be a non-negative integer");
    }
    const int64_t n = v.get<int64_t>();
    if (n > b_.limits().max_repeat) {
      throw LimitError("json_schema: " + std::string(k) + " " + std::to_string(n) + " is above " +
                       std::to_string(b_.limits().max_repeat) + " (max_repeat) at " + path + "/" +
                       k);
    }
    return n;
  }

  ExprId quoted(ExprId content) { return b_.seq({b_.byte('"'), content, b_.byte('"')}); }

  ExprId string(const json& s, const std::string& path) {
    const bool lengths = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("format")) {
      if (s.contains("pattern") || lengths)
        fail(path + "/format",
             "format together with pattern or minLength/maxLength is not supported");
      if (!s["format"].is_string()) fail(path + "/format", "format must be a string");
      const std::string f = s["format"].get<std::string>();
      const ExprId e = format_expr(b_, f);
      if (e < 0)
        fail(path + "/format",
             "format '" + f + "' is not supported (date, time, date-time, uuid, email are)");
      return quoted(e);
    }
    if (s.contains("pattern")) {
      if (lengths)
        fail(path + "/pattern", "pattern together with minLength/maxLength is not supported");
      if (!s["pattern"].is_string()) fail(path + "/pattern", "pattern must be a string");
      RegexOptions opt;
      opt.json_string = true;
      opt.search = true;
      return quoted(regex_expr(b_, s["pattern"].get<std::string>(), opt,
                               "json_schema: " + path + "/pattern"));
    }
    if (!lengths) return string_any();
    const int64_t min = s.contains("minLength") ? count(s, "minLength", path) : 0;
    const int64_t max = s.contains("maxLength") ? count(s, "maxLength", path) : kUnbounded;
    if (max != kUnbounded && max < min) fail(path, "maxLength is below minLength");
    return quoted(b_.repeat(char_any(), min, max));
  }

  // ---- arrays --------------------------------------------------------------------------------
  ExprId array(const json& s, const std::string& path, int depth) {
    std::vector<ExprId> prefix;
    if (s.contains("prefixItems")) {
      const json& p = s["prefixItems"];
      if (!p.is_array()) fail(path + "/prefixItems", "prefixItems must be an array");
      if (p.size() > static_cast<size_t>(b_.limits().max_repeat))
        throw LimitError("json_schema: prefixItems longer than max_repeat at " + path);
      for (size_t i = 0; i < p.size(); ++i)
        prefix.push_back(compile(p[i], path + "/prefixItems/" + std::to_string(i), depth + 1));
    }
    std::optional<ExprId> items;  // nullopt: no items beyond the prefix
    if (!s.contains("items")) {
      items = value_rule();
    } else if (s["items"].is_boolean() && !s["items"].get<bool>()) {
      items.reset();
    } else if (s["items"].is_array()) {
      fail(path + "/items", "items as an array (draft 4 tuples) is not supported; use prefixItems");
    } else {
      items = compile(s["items"], path + "/items", depth + 1);
    }
    const int64_t k = static_cast<int64_t>(prefix.size());
    const int64_t m = s.contains("minItems") ? count(s, "minItems", path) : 0;
    int64_t max = s.contains("maxItems") ? count(s, "maxItems", path) : kUnbounded;
    if (!items) max = max == kUnbounded ? k : std::min(max, k);
    if (max != kUnbounded && max < m)
      fail(path, "no array satisfies minItems/maxItems/prefixItems");
    auto elem = [&](int64_t i) { return i < k ? prefix[i] : *items; };
    auto sep = [&](int64_t i) { return i == 0 ? b_.empty() : b_.byte(','); };
    const ExprId close = b_.byte(']');
    // A_i: the rest of the array once i elements are written, as rules from the last one back.
    const int64_t explicit_n = max == kUnbounded ? std::max(k, m) : max;
    ExprId next;
    if (max == kUnbounded) {
      // L ::= "]" | "," items L, the open tail.
      const RuleId loop = b_.fresh_rule("array-tail");
      b_.define(loop, b_.alt({close, b_.seq({b_.byte(','), *items, b_.ref(loop)})}));
      next = explicit_n == 0 ? b_.alt({close, b_.seq({*items, b_.ref(loop)})}) : b_.ref(loop);
    } else {
      next = close;
    }
    for (int64_t i = explicit_n - 1; i >= 0; --i) {
      const RuleId r = b_.fresh_rule("array-" + std::to_string(i));
      const ExprId more = b_.seq({sep(i), elem(i), next});
      b_.define(r, i >= m ? b_.alt({close, more}) : more);
      next = b_.ref(r);
    }
    return b_.seq({b_.byte('['), next});
  }

  // ---- objects -------------------------------------------------------------------------------
  // A JSON string (with quotes) equal to none of `names`: a trie over the names' code points,
  // where a character off the trie leads to any rest and the closing quote is refused exactly
  // at the end of a name. Strings are canonical, so no escape spells a name another way.
  ExprId key_not_in(const std::vector<std::string>& names) {
    if (names.empty()) return string_any();
    struct TrieNode {
      std::map<uint32_t, int> kids;
      bool terminal = false;
    };
    std::vector<TrieNode> t(1);
    for (const auto& n : names) {
      int cur = 0;
      for (size_t i = 0; i < n.size();) {
        const uint32_t cp = decode_utf8(n, i, "property name");
        auto it = t[cur].kids.find(cp);
        if (it == t[cur].kids.end()) {
          t.emplace_back();
          it = t[cur].kids.emplace(cp, static_cast<int>(t.size() - 1)).first;
        }
        cur = it->second;
      }
      t[cur].terminal = true;
    }
    const ExprId rest = b_.seq({b_.star(char_any()), b_.byte('"')});
    std::vector<RuleId> rules(t.size());
    for (size_t i = 0; i < t.size(); ++i) rules[i] = b_.fresh_rule("key");
    for (size_t i = 0; i < t.size(); ++i) {
      std::vector<ExprId> alts;
      CodepointSet used;
      for (const auto& [cp, kid] : t[i].kids) {
        CodepointSet one;
        one.add(cp);
        used.add(cp);
        alts.push_back(b_.seq({json_char_expr(b_, one), b_.ref(rules[kid])}));
      }
      alts.push_back(b_.seq({json_char_expr(b_, used.complement()), rest}));
      if (!t[i].terminal) alts.push_back(b_.byte('"'));
      b_.define(rules[i], b_.alt(std::move(alts)));
    }
    return b_.seq({b_.byte('"'), b_.ref(rules[0])});
  }

  ExprId object(const json& s, const std::string& path, int depth) {
    struct Prop {
      std::string name;
      ExprId kv;
      bool required;
    };
    std::vector<std::string> required;
    if (s.contains("required")) {
      const json& r = s["required"];
      if (!r.is_array()) fail(path + "/required", "required must be an array of strings");
      for (const auto& x : r) {
        if (!x.is_string()) fail(path + "/required", "required must be an array of strings");
        if (std::find(required.begin(), required.end(), x.get<std::string>()) == required.end()) {
          required.push_back(x.get<std::string>());
        }
      }
    }
    const json empty_props = json::object();
    const json& props = s.contains("properties") ? s["properties"] : empty_props;
    if (!props.is_object()) fail(path + "/properties", "properties must be an object");
    // additionalProperties: absent or true = any value; false = none; a schema = that schema.
    std::optional<ExprId> extra_value;
    std::string extra_path = path + "/additionalProperties";
    if (!s.contains("additionalProperties")) {
      extra_value = value_rule();
    } else if (s["additionalProperties"].is_boolean() && !s["additionalProperties"].get<bool>()) {
      extra_value.reset();
    } else {
      extra_value = compile(s["additionalProperties"], extra_path, depth + 1);
    }
    auto is_required = [&](const std::string& n) {
      return std::find(required.begin(), required.end(), n) != required.end();
    };
    std::vector<Prop> list;
    std::vector<std::string> names;
    for (const auto& [name, sub] : props.items()) {
      names.push_back(name);
      const std::string sub_path = path + "/properties/" + pointer_escape(name);
      if (sub.is_boolean() && !sub.get<bool>()) {
        if (is_required(name))
          fail(sub_path, "property '" + name + "' is required but its schema is false");
        continue;  // forbidden: never written, and excluded from additional keys
      }
      const ExprId key = b_.literal("\"" + json_escape(name) + "\":");
      list.push_back({name, b_.seq({key, compile(sub, sub_path, depth + 1)}), is_required(name)});
    }
    // Required names without a schema of their own take additionalProperties' schema.
    for (const auto& name : required) {
      if (props.contains(name)) continue;
      if (!extra_value)
        fail(path + "/required", "'" + name + "' is required but additionalProperties is false");
      names.push_back(name);
      list.push_back(
          {name, b_.seq({b_.literal("\"" + json_escape(name) + "\":"), *extra_value}), true});
    }
    // Head_i: properties i.. with nothing written yet; Tail_i: the same after something was.
    ExprId head, tail;
    if (extra_value) {
      const ExprId extra = b_.seq({key_not_in(names), b_.byte(':'), *extra_value});
      const RuleId extras = b_.fresh_rule("object-extra");
      b_.define(extras, b_.star(b_.seq({b_.byte(','), extra})));
      tail = b_.ref(extras);
      head = b_.opt(b_.seq({extra, tail}));
    } else {
      tail = head = b_.empty();
    }
    for (size_t i = list.size(); i-- > 0;) {
      const Prop& p = list[i];
      const RuleId tr = b_.fresh_rule("object-tail");
      const RuleId hr = b_.fresh_rule("object-head");
      const ExprId with = b_.seq({b_.byte(','), p.kv, tail});
      b_.define(tr, p.required ? with : b_.alt({with, tail}));
      const ExprId first = b_.seq({p.kv, tail});
      b_.define(hr, p.required ? first : b_.alt({first, head}));
      tail = b_.ref(tr);
      head = b_.ref(hr);
    }
    return b_.seq({b_.byte('{'), head, b_.byte('}')});
  }

  // ---- enum / const --------------------------------------------------------------------------
  ExprId enum_expr(const json& s, const std::string& path) {
    if (auto o = others(s, {"enum", "const", "type"}); !o.empty()) {
      fail(path + "/" + o[0], "keyword '" + o[0] + "' beside enum/const is not supported");
    }
    std::vector<json> values;
    if (s.contains("const")) values.push_back(s["const"]);
    if (s.contains("enum")) {
      if (!s["enum"].is_array()) fail(path + "/enum", "enum must be an array");
      if (s.contains("const")) fail(path, "enum together with const is not supported");
      for (const auto& v : s["enum"]) values.push_back(v);
    }
    uint32_t allowed = kAll;
    if (s.contains("type")) {
      allowed = 0;
      for (const auto& t : types(s, path)) allowed |= type_bit(t);
    }
    std::vector<std::string> texts;
    for (const auto& v : values) {
      if (value_bits(v) & allowed) texts.push_back(serialize(v));
    }
    if (texts.empty()) fail(path, "no enum/const value has the schema's type");
    return b_.literal_set(texts);
  }

  // ---- allOf ---------------------------------------------------------------------------------
  ExprId all_of(const json& s, const std::string& path, int depth) {
    const json& list = s["allOf"];
    if (!list.is_array() || list.empty()) fail(path + "/allOf", "allOf must be a non-empty array");
    std::vector<std::pair<json, std::string>> branches;
    for (size_t i = 0; i < list.size(); ++i)
      branches.push_back({list[i], path + "/allOf/" + std::to_string(i)});
    json siblings = json::object();
    for (const auto& [k, v] : s.items()) {
      if (k != "allOf" && !kAnnotations.contains(k)) siblings[k] = v;
    }
    if (!siblings.empty()) branches.push_back({siblings, path});
    if (branches.size() == 1) return compile(branches[0].first, branches[0].second, depth + 1);
    // Several: only object schemas of properties/required merge exactly (the conjunction of
    // two such schemas is the schema of the union of their properties and requirements).
    json merged = {{"type", "object"}, {"properties", json::object()}, {"required", json::array()}};
    for (const auto& [raw, bpath] : branches) {
      const json& br = deref(raw, bpath);
      if (!br.is_object()) fail(bpath, "allOf merges object schemas only");
      for (const auto& [k, v] : br.items()) {
        if (kAnnotations.contains(k)) continue;
        if (k == "type" && v == "object") continue;
        if (k == "additionalProperties" && v.is_boolean() && v.get<bool>()) continue;
        if (k == "properties" && v.is_object()) {
          for (const auto& [name, sub] : v.items()) {
            if (merged["properties"].contains(name) && merged["properties"][name] != sub) {
              fail(bpath + "/properties/" + pointer_escape(name),
                   "allOf branches give property '" + name + "' different schemas");
            }
            merged["properties"][name] = sub;
          }
          continue;
        }
        if (k == "required" && v.is_array()) {
          for (const auto& x : v) {
            if (std::find(merged["required"].begin(), merged["required"].end(), x) ==
                merged["required"].end()) {
              merged["required"].push_back(x);
            }
          }
          continue;
        }
        fail(bpath + "/" + pointer_escape(k),
             "allOf of several schemas merges type object, properties and required only; '" + k +
                 "' is not merged");
      }
    }
    return compile(merged, path + "/allOf", depth + 1);
  }

  // ---- oneOf ---------------------------------------------------------------------------------
  uint32_t type_bits(const json& raw, const std::string& path, int depth) {
    if (depth > b_.limits().max_nesting) return kAll;
    const json& s = deref(raw, path);
    if (s.is_boolean()) return s.get<bool>() ? static_cast<uint32_t>(kAll) : 0u;
    if (!s.is_object()) return kAll;
    if (s.contains("const")) return value_bits(s["const"]);
    if (s.contains("enum") && s["enum"].is_array()) {
      uint32_t bits = 0;
      for (const auto& v : s["enum"]) bits |= value_bits(v);
      return bits;
    }
    for (const char* k : {"anyOf", "oneOf"}) {
      if (s.contains(k) && s[k].is_array()) {
        uint32_t bits = 0;
        for (const auto& b : s[k]) bits |= type_bits(b, path, depth + 1);
        return bits;
      }
    }
    if (s.contains("allOf")) return kObject;
    uint32_t bits = 0;
    for (const auto& t : types(s, path))
      bits |= t == "any" ? static_cast<uint32_t>(kAll) : type_bit(t);
    return bits;
  }

  // The values a required property is pinned to by const/enum in every branch, or nothing.
  std::optional<std::set<std::string>> pinned(const json& branch, const std::string& name,
                                              const std::string& path) {
    const json& s = deref(branch, path);
    if (!s.is_object() || !s.contains("required") || !s.contains("properties")) return std::nullopt;
    const json& req = s["required"];
    if (!req.is_array() || std::find(req.begin(), req.end(), name) == req.end())
      return std::nullopt;
    if (!s["properties"].is_object() || !s["properties"].contains(name)) return std::nullopt;
    const json& p = deref(s["properties"][name], path);
    if (!p.is_object()) return std::nullopt;
    std::set<std::string> out;
    if (p.contains("const")) {
      out.insert(serialize(p["const"]));
    } else if (p.contains("enum") && p["enum"].is_array()) {
      for (const auto& v : p["enum"]) out.insert(serialize(v));
    } else {
      return std::nullopt;
    }
    return out;
  }

  // oneOf needs exactly one branch to match. The grammar is the union of the branches, which is
  // exact when no value matches two of them: accepted when the branches' types are disjoint, or
  // when all are objects with a required property pinned to disjoint const/enum values.
  void check_one_of(const json& branches, const std::string& path) {
    std::vector<uint32_t> bits;
    for (size_t i = 0; i < branches.size(); ++i)
      bits.push_back(type_bits(branches[i], path + "/" + std::to_string(i), 0));
    bool disjoint = true;
    for (size_t i = 0; i < bits.size() && disjoint; ++i) {
      for (size_t j = i + 1; j < bits.size(); ++j) {
        if (bits[i] & bits[j]) disjoint = false;
      }
    }
    if (disjoint) return;
    const json& first = deref(branches[0], path);
    if (first.is_object() && first.contains("required") && first["required"].is_array()) {
      for (const auto& cand : first["required"]) {
        if (!cand.is_string()) continue;
        std::set<std::string> all;
        bool ok = true;
        size_t total = 0;
        for (size_t i = 0; i < branches.size() && ok; ++i) {
          auto vals = pinned(branches[i], cand.get<std::string>(), path);
          if (!vals) {
            ok = false;
            break;
          }
          total += vals->size();
          all.insert(vals->begin(), vals->end());
        }
        if (ok && all.size() == total) return;
      }
    }
    fail(path,
         "oneOf branches may overlap (a value could match two); supported are branches of "
         "disjoint types or objects told apart by a required const/enum property; use anyOf");
  }

  Builder& b_;
  const json& root_;
  std::map<std::string, RuleId> ref_rules_;
  std::vector<std::pair<std::string, RuleId>> pending_;
  RuleId char_rule_ = -1, string_rule_ = -1, value_rule_ = -1, object_rule_ = -1;
};

}  // namespace

RuleId json_schema_rules(Builder& b, const nlohmann::ordered_json& schema,
                         const std::string& root_name) {
  return SchemaCompiler(b, schema).run(root_name);
}

RuleId json_object_rules(Builder& b) {
  const json empty = json::object();
  return SchemaCompiler(b, empty).any_object_rule();
}

}  // namespace invar::grammar
