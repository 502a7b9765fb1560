// Errors of the grammar module: a front end refuses what it cannot enforce (Error, naming the
// keyword or construct and where it is), and every bound in Limits ends in LimitError.
#pragma once

#include <string>

#include "core/error.h"

namespace invar::grammar {

// Bad or unsupported input: a syntax error, a keyword that cannot be enforced, left recursion.
// The message names the construct and its location (JSON path, byte offset or rule name).
class Error : public invar::Error {
 public:
  explicit Error(const std::string& what) : invar::Error(what) {}
};

// An explicit bound of Limits was reached (input size, grammar size, nesting, repetition,
// matcher ambiguity). A hostile input ends here, in time and memory proportional to the bound.
class LimitError : public Error {
 public:
  explicit LimitError(const std::string& what) : Error(what) {}
};

}  // namespace invar::grammar
