// Reading a request body's JSON the one way every front end reads it: a body parsed with a
// nesting bound, members where null counts as absent, and wrong types named with the field.
// Throws ApiError (400) naming the field.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace invar::server {

// Bodies nesting deeper are junk, not requests (and deep recursion in the parser's callers).
inline constexpr int kMaxJsonDepth = 64;

// The body as an object: a 400 when it is not valid JSON, nests deeper than kMaxJsonDepth or is
// not an object.
nlohmann::ordered_json json_body_parse(std::string_view text);

// o[name], or null when absent or null.
const nlohmann::ordered_json* json_member(const nlohmann::ordered_json& o, const char* name);

// "null", "a boolean", "a number", "a string", "an array", "an object".
const char* json_type_name(const nlohmann::ordered_json& v);

// 400: "'field' must be WANT, got TYPE".
[[noreturn]] void json_wrong_type(const std::string& field, const char* want,
                                  const nlohmann::ordered_json& v);

}  // namespace invar::server
