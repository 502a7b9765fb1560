// The parsed template: one node type for expressions and statements, as jinja2's nodes.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/value.h"

namespace invar::chat {

enum class NodeKind : uint8_t {
  // expressions
  Const,     // value
  Name,      // name
  ListLit,   // kids: items
  TupleLit,  // kids: items
  DictLit,   // kids: key0, value0, key1, value1, ...
  Getattr,   // kids[0] . name
  Getitem,   // kids[0] [ kids[1] ]
  Slice,     // kids: start, stop, step (each may be null)
  Call,      // kids[0] ( args )
  Filter,    // kids[0] | name ( args ); kids[0] null inside a filter block / block set
  Test,      // kids[0] is name ( args )
  Unary,     // name: "-", "+", "not"; kids[0]
  Binary,    // name: + - * / // % ** ~ ; kids[0], kids[1]
  And,       // kids[0] and kids[1]
  Or,        // kids[0] or kids[1]
  Compare,   // kids[0] ops[0] kids[1] ops[1] kids[2] ... (chained as in Python)
  CondExpr,  // kids: test, then, else (may be null)
  // statements
  Output,       // name: literal text
  Print,        // {{ kids[0] }}
  If,           // kids[0] test; body; orelse (an elif is a nested If)
  For,          // kids: target, iterable, filter test (may be null); body; orelse
  Set,          // kids: target, value. Target: Name, TupleLit of Names, or NsRef
  SetBlock,     // kids: target, filter (may be null); body
  NsRef,        // name . attr (a namespace attribute as assignment target)
  Macro,        // name; params + defaults; body
  CallBlock,    // kids[0]: the Call; params + defaults of `caller`; body
  FilterBlock,  // kids[0]: filter chain; body
  With,         // kids: targets..., values... (params holds the names); body
  Break,
  Continue,
};

struct Node;
using NodePtr = std::unique_ptr<Node>;

struct Node {
  NodeKind kind;
  int line = 0, col = 0;
  std::string name;
  std::string attr;                                     // NsRef attribute
  Value value;                                          // Const
  std::vector<NodePtr> kids;                            // operands (see NodeKind)
  std::vector<std::string> ops;                         // Compare operators
  std::vector<std::pair<std::string, NodePtr>> kwargs;  // Call / Filter / Test keyword args
  NodePtr star_args, star_kwargs;                       // *args, **kwargs in a call
  std::vector<std::string> params;                      // Macro / CallBlock / With names
  std::vector<NodePtr> defaults;                        // per param, null when none
  std::vector<NodePtr> body, orelse;
  bool uses_caller = false, uses_varargs = false, uses_kwargs = false;  // Macro
};

}  // namespace invar::chat
