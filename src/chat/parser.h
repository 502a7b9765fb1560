// Tokens -> AST, following jinja2's parser (operator precedence, tuples, slices, filters and
// tests, statements of the core language plus loopcontrols and transformers' generation tag).
// Unknown filters and tests are errors at parse time, as jinja2 reports them at compile time.
#pragma once

#include <vector>

#include "chat/ast.h"
#include "chat/lexer.h"

namespace invar::chat {

struct ParseLimits {
  int max_depth = 128;  // nesting of expressions and blocks
};

// Throws TemplateError (syntax) with line and column.
std::vector<NodePtr> parse(const std::vector<Token>& tokens, const ParseLimits& limits = {});

}  // namespace invar::chat
