// Numbers of a JSON Schema as exact digit-range grammars (no over- or under-approximation):
// integers in [lo, hi] and decimals between integer bounds, in canonical decimal form.
#pragma once

#include <cstdint>
#include <optional>

#include "grammar/builder.h"

namespace invar::grammar {

// Canonical integers (no leading zeros, no "-0") in [lo, hi]; nullopt = unbounded that side.
// Size O(digits · 10) elements. Requires lo <= hi when both are given.
ExprId integer_range_expr(Builder& b, std::optional<int64_t> lo, std::optional<int64_t> hi);

// Decimals -?I(.F)? (no exponent) whose value x satisfies lo <(=) x <(=) hi, with integer bounds
// (nullopt: unbounded) and the given inclusiveness. Returns -1 when the range is empty.
ExprId decimal_range_expr(Builder& b, std::optional<int64_t> lo, bool lo_inclusive,
                          std::optional<int64_t> hi, bool hi_inclusive);

// Any JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
ExprId number_expr(Builder& b);

}  // namespace invar::grammar
