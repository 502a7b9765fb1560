// String formats of JSON Schema as exact grammars of the string content (no quotes), each a
// subset of what Python's jsonschema FORMAT_CHECKER accepts:
//   date       RFC 3339 full-date, days per month exact, Feb 29 only in leap years, year >= 0001
//   time       RFC 3339 full-time: HH:MM:SS(.frac)? then Z or ±HH:MM (no leap second 60)
//   date-time  date "T" time
//   uuid       8-4-4-4-12 lowercase hex
//   email      dot-atom local part "@" a domain of two or more labels (ASCII)
#pragma once

#include <string>

#include "grammar/builder.h"

namespace invar::grammar {

// -1 when the format is not supported.
ExprId format_expr(Builder& b, const std::string& format);

}  // namespace invar::grammar
