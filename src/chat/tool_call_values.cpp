// Tool-call bodies → JSON: Hermes JSON calls, and XML parameter values typed by the tool's
// schema the way vLLM's qwen3coder parser types them (its _convert_param_value). Python
// literals that are not JSON (True, 'text', (1, 2)) are not evaluated: such a value stays a
// string where vLLM would run ast.literal_eval.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "chat/output_parser.h"

namespace invar::chat {
namespace {

using ojson = nlohmann::ordered_json;

constexpr int kMaxJsonDepth = 64;  // model output nested deeper is not taken as JSON

bool json_parse(std::string_view text, ojson* out) {
  try {
    *out = ojson::parse(text, [](int depth, ojson::parse_event_t, ojson&) {
      if (depth > kMaxJsonDepth) throw std::runtime_error("too deep");
      return true;
    });
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

// The schema of `param` in `function`'s parameters, or null when the tools do not declare it.
const ojson* parameter_schema(const ojson& tools, const std::string& function,
                              const std::string& param) {
  if (!tools.is_array()) return nullptr;
  for (const ojson& t : tools) {
    if (!t.is_object()) continue;
    auto fn = t.find("function");
    const ojson& f = fn != t.end() && fn->is_object() ? *fn : t;
    auto name = f.find("name");
    if (name == f.end() || !name->is_string() || *name != function) continue;
    auto params = f.find("parameters");
    if (params == f.end() || !params->is_object()) return nullptr;
    auto props = params->find("properties");
    if (props == params->end() || !props->is_object()) return nullptr;
    auto p = props->find(param);
    return p == props->end() ? nullptr : &*p;
  }
  return nullptr;
}

// The declared type (lower case) and whether null is allowed.
std::string schema_type(const ojson& schema, bool* allows_null) {
  *allows_null = false;
  if (!schema.is_object()) return "string";
  auto t = schema.find("type");
  if (t != schema.end()) {
    if (t->is_string()) {
      std::string ty = lower(trim(t->get<std::string>()));
      *allows_null = ty == "null";
      return ty;
    }
    if (t->is_array()) {  // ["integer", "null"]
      std::string first;
      for (const ojson& x : *t) {
        if (!x.is_string()) continue;
        std::string ty = lower(trim(x.get<std::string>()));
        if (ty == "null")
          *allows_null = true;
        else if (first.empty())
          first = ty;
      }
      return first.empty() ? "null" : first;
    }
    return "string";
  }
  auto any = schema.find("anyOf");
  if (any == schema.end() || !any->is_array()) return "string";
  std::string picked;
  for (const ojson& option : *any) {
    if (!option.is_object() || !option.contains("type") || !option["type"].is_string()) continue;
    std::string ty = lower(trim(option["type"].get<std::string>()));
    if (ty == "null")
      *allows_null = true;
    else if (picked.empty())
      picked = ty;
  }
  return picked.empty() ? "string" : picked;
}

bool starts(const std::string& s, std::initializer_list<const char*> prefixes) {
  for (const char* p : prefixes)
    if (s.rfind(p, 0) == 0) return true;
  return false;
}

bool parse_int(const std::string& raw, int64_t* out) {
  std::string s = trim(raw);
  if (!s.empty() && s[0] == '+') s.erase(0, 1);
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *out);
  return !s.empty() && ec == std::errc() && p == end;
}

bool parse_float(const std::string& raw, double* out) {
  std::string s = trim(raw);
  if (s.empty() || s.find_first_of("xXpP") != std::string::npos) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(*out);
}

}  // namespace

std::string json_compact(const ojson& v) {
  return v.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

ojson tool_parameter_value(const ojson& tools, const std::string& function,
                           const std::string& param, const std::string& raw) {
  const ojson* schema = parameter_schema(tools, function, param);
  if (!schema) return raw;
  bool allows_null = false;
  const std::string type = schema_type(*schema, &allows_null);
  const std::string low = lower(raw);
  const bool null_word = low == "null" || low == "none";
  if (allows_null && null_word) return nullptr;
  if (type == "string" || type == "str" || type == "text" || type == "varchar" || type == "char" ||
      type == "enum")
    return raw;
  if (null_word) return nullptr;
  if (starts(type, {"int", "uint", "long", "short", "unsigned"})) {
    int64_t v = 0;
    return parse_int(raw, &v) ? ojson(v) : ojson(raw);
  }
  if (starts(type, {"num", "float"})) {
    double v = 0;
    if (!parse_float(raw, &v)) return raw;
    if (v == std::trunc(v) && std::fabs(v) < 9.2e18) return int64_t(v);
    return v;
  }
  if (type == "boolean" || type == "bool" || type == "binary") return low == "true";
  ojson parsed;
  if (json_parse(raw, &parsed)) return parsed;
  return raw;
}

bool tool_call_from_json(std::string_view body, std::string* name, std::string* arguments) {
  ojson call;
  if (!json_parse(body, &call) || !call.is_object()) return false;
  auto n = call.find("name");
  if (n == call.end() || !n->is_string() || n->get<std::string>().empty()) return false;
  auto a = call.find("arguments");
  ojson args = ojson::object();
  if (a != call.end() && !a->is_null()) {
    if (a->is_object()) {
      args = *a;
    } else if (!a->is_string() || !json_parse(a->get<std::string>(), &args) || !args.is_object()) {
      return false;
    }
  }
  *name = n->get<std::string>();
  *arguments = json_compact(args);
  return true;
}

}  // namespace invar::chat
