// JSON Schema (draft 2020-12 keywords, plus draft-07 `definitions`) to byte-level rules.
// Output is compact and fixed: no whitespace, properties in schema order, strings in the
// canonical escaping of json_char_expr. What is supported and refused: docs/structured-output.md.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "grammar/builder.h"

namespace invar::grammar {

// Compiles `schema` into b's rules and returns the root rule (named `root`, or with another
// name a fresh rule after it, so that several schemas share one builder). Throws Error naming
// the keyword and its JSON pointer for anything it cannot enforce; LimitError past b.limits().
RuleId json_schema_rules(Builder& b, const nlohmann::ordered_json& schema,
                         const std::string& root_name = "root");

// Any JSON object (response_format json_object), compact.
RuleId json_object_rules(Builder& b);

}  // namespace invar::grammar
