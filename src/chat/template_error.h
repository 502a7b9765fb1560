// The error a template raises: a syntax error, a runtime error or the template's own
// raise_exception(). The message carries "line L, column C" for the first two.
#pragma once

#include <string>

#include "core/error.h"

namespace invar::chat {

class TemplateError : public Error {
 public:
  enum class Kind { Syntax, Runtime, Raised };
  TemplateError(Kind kind, const std::string& message, int line, int col)
      : Error(kind == Kind::Raised ? message
                                   : "line " + std::to_string(line) + ", column " +
                                         std::to_string(col) + ": " + message),
        kind_(kind),
        line_(line),
        col_(col) {}
  Kind kind() const { return kind_; }
  int line() const { return line_; }
  int col() const { return col_; }

 private:
  Kind kind_;
  int line_, col_;
};

}  // namespace invar::chat
