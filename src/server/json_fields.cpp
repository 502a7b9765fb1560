#include "server/json_fields.h"

#include "server/api_error.h"

namespace invar::server {

using ojson = nlohmann::ordered_json;

ojson json_body_parse(std::string_view text) {
  ojson body;
  try {
    body = ojson::parse(text, [](int depth, ojson::parse_event_t, ojson&) {
      if (depth > kMaxJsonDepth)
        throw bad_request("", "request body nests deeper than " + std::to_string(kMaxJsonDepth));
      return true;
    });
  } catch (const ojson::exception& e) {
    throw bad_request("", std::string("request body is not valid JSON: ") + e.what());
  }
  if (!body.is_object()) throw bad_request("", "request body must be a JSON object");
  return body;
}

const ojson* json_member(const ojson& o, const char* name) {
  auto it = o.find(name);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

const char* json_type_name(const ojson& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

void json_wrong_type(const std::string& field, const char* want, const ojson& v) {
  throw bad_request(field, "'" + field + "' must be " + want + ", got " + json_type_name(v));
}

}  // namespace invar::server
