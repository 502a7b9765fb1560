// Every top-level field of a completions or chat request that invar knows: OpenAI's, vLLM's
// extras and llama-server's extras, each with what invar does with it. A request is checked
// against this registry before it is parsed, so that no field is ever silently ignored: a field
// is implemented (parsed by api_request.cpp), a no-op accepted only with the values that change
// nothing, or rejected with a 400 naming it; a field the registry does not know is rejected too.
// docs/api.md shows the same table; a test compares the two both ways.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "server/api_request.h"

namespace invar::server {

enum class FieldStatus {
  implemented,  // parsed and honoured
  no_op,        // accepted only with `accepted` values, which change nothing
  rejected,     // any value but null is a 400
};

enum FieldEndpoints : unsigned { kCompletionsOnly = 1, kChatOnly = 2, kBothEndpoints = 3 };

struct RequestField {
  const char* name;
  unsigned endpoints;  // FieldEndpoints
  const char* origin;  // the API that defines it: "OpenAI", "vLLM" or "llama-server"
  FieldStatus status;
  // no_op: the accepted JSON values separated by " or "; "any" (the field acts only together
  // with another field that is itself held at its no-op value); "n" (equal to n).
  // implemented: a value the live test sends ("" for the prompt fields every request has, and
  // for reasoning_effort, which needs a template with a thinking switch: tested on its own).
  const char* values;
  const char* note;  // why, in a few words (docs/api.md repeats it)
};

const std::vector<RequestField>& request_fields();
std::string_view field_status_name(FieldStatus s);  // "implemented" | "no-op" | "rejected"

// A no-op field's accepted values, parsed ("any" and "n" have none).
std::vector<nlohmann::json> field_accepted_values(const RequestField& f);

// The registry entry for `name` on `endpoint`, or null.
const RequestField* request_field_find(std::string_view name, Endpoint endpoint);

// Throws ApiError (400) for the first field that is unknown, rejected, or a no-op with a value
// that would change the output. Null values count as absent (as in OpenAI's API).
void request_fields_check(const nlohmann::json& body, Endpoint endpoint);

}  // namespace invar::server
