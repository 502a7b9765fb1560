// Structured output as clients ask for it: OpenAI's response_format, vLLM's structured_outputs
// and guided_* fields, llama-server's grammar and json_schema, all read into one constraint
// (a grammar kind and its text) that the job compiles (grammar/compile.h) and the engine
// enforces. At most one of them per request; docs/structured-output.md lists what each takes.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "grammar/compile.h"

namespace invar::server {

struct OutputConstraint {
  grammar::Kind kind = grammar::Kind::json_object;
  std::string text;   // the grammar's text: a schema's JSON, a regex, a GBNF, a JSON array
  std::string field;  // the request field that carried it, for errors ("response_format")
};

// The fields output_constraint_parse reads; a body with none of them has no constraint.
const std::vector<const char*>& output_constraint_fields();

// Refuses (400 naming the field) a constraint field whose JSON is larger than the grammar
// compiler takes (grammar::Limits::max_input_bytes), before the body is read a second time as
// ordered JSON (whose objects insert keys in linear time: a schema of 40k properties would cost
// seconds there).
void output_constraint_size_check(const nlohmann::json& body);

// Throws ApiError (400) naming the field: wrong types, unknown keys of structured_outputs,
// options invar cannot honour (whitespace_pattern, structural_tag), two fields that both
// constrain. The body's keys in client order (a schema's properties keep theirs). nullopt: none,
// or response_format {"type": "text"}.
std::optional<OutputConstraint> output_constraint_parse(const nlohmann::ordered_json& body);

}  // namespace invar::server
