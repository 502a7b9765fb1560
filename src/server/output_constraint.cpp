#include "server/output_constraint.h"

#include <vector>

#include "grammar/limits.h"
#include "server/api_error.h"
#include "server/json_fields.h"

namespace invar::server {
namespace {

using ojson = nlohmann::ordered_json;
using grammar::Kind;

[[noreturn]] void wrong(const std::string& field, const std::string& want) {
  throw bad_request(field, "'" + field + "' must be " + want);
}

std::string string_of(const ojson& v, const std::string& field) {
  if (!v.is_string()) wrong(field, "a string");
  if (v.get_ref<const std::string&>().empty()) throw bad_request(field, "'" + field + "' is empty");
  return v.get<std::string>();
}

// A schema given as an object, or as JSON text (vLLM accepts both for guided_json).
std::string schema_of(const ojson& v, const std::string& field) {
  if (v.is_object() || v.is_boolean()) return v.dump();
  if (v.is_string()) {
    try {
      return ojson::parse(v.get_ref<const std::string&>()).dump();
    } catch (const ojson::exception&) {
      throw bad_request(field, "'" + field + "' is a string but not JSON text of a schema");
    }
  }
  wrong(field, "a JSON Schema (an object, or its JSON text)");
}

std::string choices_of(const ojson& v, const std::string& field) {
  if (!v.is_array() || v.empty()) wrong(field, "a non-empty array of strings");
  for (size_t i = 0; i < v.size(); ++i)
    if (!v[i].is_string()) wrong(field + "[" + std::to_string(i) + "]", "a string");
  return v.dump();
}

bool bool_of(const ojson& v, const std::string& field) {
  if (!v.is_boolean()) wrong(field, "a boolean");
  return v.get<bool>();
}

std::optional<OutputConstraint> response_format(const ojson& v) {
  const std::string f = "response_format";
  if (!v.is_object()) wrong(f, "an object");
  const ojson* t = json_member(v, "type");
  if (!t || !t->is_string()) throw bad_request(f + ".type", "'response_format.type' is required");
  const std::string& type = t->get_ref<const std::string&>();
  for (auto it = v.begin(); it != v.end(); ++it)
    if (it.key() != "type" && it.key() != "json_schema" && it.key() != "schema")
      throw bad_request(f + "." + it.key(), "'response_format." + it.key() + "' is not a field");
  if (type == "text") return std::nullopt;
  if (type == "json_object") {
    // llama-server reads a schema beside json_object.
    if (const ojson* s = json_member(v, "schema"))
      return OutputConstraint{Kind::json_schema, schema_of(*s, f + ".schema"), f};
    return OutputConstraint{Kind::json_object, "", f};
  }
  if (type == "json_schema") {
    const ojson* js = json_member(v, "json_schema");
    if (!js || !js->is_object())
      throw bad_request(f + ".json_schema",
                        "'response_format.json_schema' (an object with the schema) is required");
    for (auto it = js->begin(); it != js->end(); ++it) {
      const std::string& k = it.key();
      if (k == "name" || k == "description") {
        if (!it->is_string()) wrong(f + ".json_schema." + k, "a string");
      } else if (k == "strict") {
        bool_of(*it, f + ".json_schema.strict");  // always strict: the grammar enforces it
      } else if (k != "schema") {
        throw bad_request(f + ".json_schema." + k,
                          "'response_format.json_schema." + k + "' is not a field");
      }
    }
    const ojson* s = json_member(*js, "schema");
    if (!s)
      throw bad_request(f + ".json_schema.schema",
                        "'response_format.json_schema.schema' is required");
    return OutputConstraint{Kind::json_schema, schema_of(*s, f + ".json_schema.schema"), f};
  }
  throw bad_request(f + ".type",
                    "'response_format.type' must be text, json_object or "
                    "json_schema, not '" +
                        type + "'");
}

// vLLM's structured_outputs: exactly one of json, regex, choice, grammar, json_object.
std::optional<OutputConstraint> structured_outputs(const ojson& v) {
  const std::string f = "structured_outputs";
  if (!v.is_object()) wrong(f, "an object");
  std::optional<OutputConstraint> c;
  auto set = [&](const std::string& key, Kind kind, std::string text) {
    if (c)
      throw bad_request(f, "'structured_outputs' holds both '" + c->field.substr(f.size() + 1) +
                               "' and '" + key + "': give one");
    c = OutputConstraint{kind, std::move(text), f + "." + key};
  };
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& k = it.key();
    const std::string name = f + "." + k;
    if (it->is_null()) continue;
    if (k == "json")
      set(k, Kind::json_schema, schema_of(*it, name));
    else if (k == "regex")
      set(k, Kind::regex, string_of(*it, name));
    else if (k == "choice")
      set(k, Kind::choice, choices_of(*it, name));
    else if (k == "grammar")
      set(k, Kind::gbnf, string_of(*it, name));
    else if (k == "json_object") {
      if (bool_of(*it, name)) set(k, Kind::json_object, "");
    } else if (k == "disable_fallback" || k == "disable_any_whitespace") {
      // No fallback backend exists, and the JSON form is always compact: either value holds.
      bool_of(*it, name);
    } else if (k == "disable_additional_properties") {
      if (bool_of(*it, name))
        throw bad_request(name, "'" + name +
                                    "' is not supported: write additionalProperties: false in "
                                    "the schema");
    } else if (k == "whitespace_pattern") {
      throw bad_request(name, "'" + name +
                                  "' is not supported: invar's JSON output is compact, with no "
                                  "whitespace between tokens");
    } else if (k == "structural_tag") {
      throw bad_request(name, "'" + name + "' is not supported");
    } else {
      throw bad_request(name, "'" + name + "' is not a field of structured_outputs");
    }
  }
  if (!c)
    throw bad_request(f,
                      "'structured_outputs' names no constraint: give json, regex, choice, "
                      "grammar or json_object");
  return c;
}

}  // namespace

void output_constraint_size_check(const nlohmann::json& body) {
  const size_t limit = grammar::Limits{}.max_input_bytes;
  for (const char* k : output_constraint_fields()) {
    auto it = body.find(k);
    if (it == body.end() || it->is_null()) continue;
    const size_t n = it->is_string() ? it->get_ref<const std::string&>().size() : it->dump().size();
    if (n > limit)
      throw bad_request(k, "'" + std::string(k) + "' holds " + std::to_string(n) +
                               " bytes, above the " + std::to_string(limit) +
                               " a constraint may have (max_input_bytes)");
  }
}

const std::vector<const char*>& output_constraint_fields() {
  static const std::vector<const char*> names = {
      "response_format", "structured_outputs", "guided_json", "guided_regex",
      "guided_choice",   "guided_grammar",     "grammar",     "json_schema"};
  return names;
}

std::optional<OutputConstraint> output_constraint_parse(const ojson& body) {
  std::vector<OutputConstraint> found;
  auto take = [&](std::optional<OutputConstraint> c) {
    if (c) found.push_back(std::move(*c));
  };
  if (const ojson* v = json_member(body, "response_format")) take(response_format(*v));
  if (const ojson* v = json_member(body, "structured_outputs")) take(structured_outputs(*v));
  if (const ojson* v = json_member(body, "guided_json"))
    take(OutputConstraint{Kind::json_schema, schema_of(*v, "guided_json"), "guided_json"});
  if (const ojson* v = json_member(body, "guided_regex"))
    take(OutputConstraint{Kind::regex, string_of(*v, "guided_regex"), "guided_regex"});
  if (const ojson* v = json_member(body, "guided_choice"))
    take(OutputConstraint{Kind::choice, choices_of(*v, "guided_choice"), "guided_choice"});
  if (const ojson* v = json_member(body, "guided_grammar"))
    take(OutputConstraint{Kind::gbnf, string_of(*v, "guided_grammar"), "guided_grammar"});
  if (const ojson* v = json_member(body, "grammar"))
    take(OutputConstraint{Kind::gbnf, string_of(*v, "grammar"), "grammar"});
  if (const ojson* v = json_member(body, "json_schema"))
    take(OutputConstraint{Kind::json_schema, schema_of(*v, "json_schema"), "json_schema"});
  if (found.size() > 1)
    throw bad_request(found[1].field, "'" + found[0].field + "' and '" + found[1].field +
                                          "' both constrain the output: send one");
  if (found.empty()) return std::nullopt;
  return std::move(found[0]);
}

}  // namespace invar::server
