// Tool calls as a chat template's output parser reads them (tool_choice "required" or a named
// function): the output is one call, or with `parallel` one or more, of the listed tools, each
// in the template's syntax, so that every output parses into tool_calls.
//
// The spec (a JSON object, the text of Kind::tool_calls):
//   {"syntax": "hermes" | "qwen3_xml", "parallel": bool, "text_first": bool,
//    "tools": [{"name": "get_weather", "parameters": {JSON Schema} (absent: any object)}, ...]}
// text_first (tool_choice "auto" with strict tools): any text without "<tool_call>" comes
// first, and the calls are optional: the model chooses whether to call, and a call parses.
// hermes (Hermes, Qwen2.5, Qwen3):
//   <tool_call>\n{"name":"NAME","arguments":ARGS}\n</tool_call>   ARGS: compact JSON of the schema,
//   with no properties beyond those listed unless the schema sets additionalProperties
// qwen3_xml (Qwen3-Coder, Qwen3.5):
//   <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n...</function>\n</tool_call>
//   parameters in schema order, the required ones always, the others optional; VALUE is compact
//   JSON of the property's schema, or for a string property its raw text (any text without
//   "</parameter>", which would end it; with minLength/maxLength, that many characters other
//   than '<'). A schema with no plain `properties` takes any names.
// Calls are separated by "\n". Errors name the tool and the schema keyword (json_schema.h).
#pragma once

#include <nlohmann/json.hpp>

#include "grammar/builder.h"

namespace invar::grammar {

RuleId tool_calls_rules(Builder& b, const nlohmann::ordered_json& spec);

// Any UTF-8 text that does not contain `stop` (ASCII, no proper prefix that is also a suffix).
ExprId text_without(Builder& b, std::string_view stop);

}  // namespace invar::grammar
