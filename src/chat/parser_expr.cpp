// Expressions, with jinja2's precedence: condexpr < or < and < not < compare < + - < ~ <
// * / // % < ** < unary < postfix (. [] ()) and filters/tests.
#include "chat/builtins.h"
#include "chat/parser_state.h"
#include "chat/template_error.h"

namespace invar::chat {

std::string describe(const Token& t) {
  switch (t.type) {
    case Tok::Eof:
      return "end of template";
    case Tok::BlockBegin:
      return "begin of statement block";
    case Tok::BlockEnd:
      return "end of statement block";
    case Tok::VarBegin:
      return "begin of print statement";
    case Tok::VarEnd:
      return "end of print statement";
    case Tok::Data:
      return "template data";
    default:
      return t.text;
  }
}

void Parser::fail(const std::string& msg, const Token& at) const {
  throw TemplateError(TemplateError::Kind::Syntax, msg, at.line, at.col);
}

void Parser::enter() {
  if (++depth_ > limits_.max_depth) {
    --depth_;
    fail("template nested too deeply (limit " + std::to_string(limits_.max_depth) + ")");
  }
}

NodePtr Parser::make(NodeKind k, const Token& at) const {
  auto n = std::make_unique<Node>();
  n->kind = k;
  n->line = at.line;
  n->col = at.col;
  return n;
}

bool Parser::skip_op(const char* op) {
  if (!is_op(op)) return false;
  next();
  return true;
}

bool Parser::skip_name(const char* n) {
  if (!is_name(n)) return false;
  next();
  return true;
}

const Token& Parser::expect_op(const char* op) {
  if (!is_op(op)) fail(std::string("expected token '") + op + "', got '" + describe(cur()) + "'");
  return next();
}

const Token& Parser::expect_name(const char* n) {
  if (cur().type != Tok::Name || (n && cur().text != n)) {
    fail(std::string("expected token '") + (n ? n : "name") + "', got '" + describe(cur()) + "'");
  }
  return next();
}

const Token& Parser::expect(Tok t) {
  if (cur().type != t) {
    Token want{t, ""};
    fail("expected token '" + describe(want) + "', got '" + describe(cur()) + "'");
  }
  return next();
}

NodePtr Parser::parse_expression(bool with_condexpr) {
  DepthGuard g(*this);
  return with_condexpr ? parse_condexpr() : parse_or();
}

NodePtr Parser::parse_condexpr() {
  NodePtr expr1 = parse_or();
  while (is_name("if")) {
    const Token& at = next();
    NodePtr expr2 = parse_or();
    NodePtr expr3;
    if (skip_name("else")) expr3 = parse_condexpr();
    auto n = make(NodeKind::CondExpr, at);
    n->kids.push_back(std::move(expr2));
    n->kids.push_back(std::move(expr1));
    n->kids.push_back(std::move(expr3));
    expr1 = std::move(n);
  }
  return expr1;
}

static NodePtr binary(NodePtr n, NodePtr a, NodePtr b) {
  n->kids.push_back(std::move(a));
  n->kids.push_back(std::move(b));
  return n;
}

// One left-associative level: operand (op operand)*. Keyword levels (`or`, `and`) make nodes of
// their own kind; symbol levels make Binary nodes named by their operator.
template <class Operand>
NodePtr Parser::parse_left_assoc(NodeKind kind, std::initializer_list<const char*> ops,
                                 Operand operand) {
  const bool keyword = kind != NodeKind::Binary;
  auto at_op = [&] {
    for (const char* o : ops)
      if (keyword ? is_name(o) : is_op(o)) return true;
    return false;
  };
  NodePtr left = operand();
  while (at_op()) {
    const Token& at = next();
    auto n = make(kind, at);
    if (!keyword) n->name = at.text;
    left = binary(std::move(n), std::move(left), operand());
  }
  return left;
}

NodePtr Parser::parse_or() {
  return parse_left_assoc(NodeKind::Or, {"or"}, [this] { return parse_and(); });
}

NodePtr Parser::parse_and() {
  return parse_left_assoc(NodeKind::And, {"and"}, [this] { return parse_not(); });
}

NodePtr Parser::parse_not() {
  if (is_name("not")) {
    DepthGuard g(*this);
    const Token& at = next();
    auto n = make(NodeKind::Unary, at);
    n->name = "not";
    n->kids.push_back(parse_not());
    return n;
  }
  return parse_compare();
}

NodePtr Parser::parse_compare() {
  const Token& at = cur();
  NodePtr expr = parse_math1();
  NodePtr cmp;
  while (true) {
    std::string op;
    if (cur().type == Tok::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                  cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
      op = next().text;
    } else if (skip_name("in")) {
      op = "in";
    } else if (is_name("not") && look().type == Tok::Name && look().text == "in") {
      next();
      next();
      op = "notin";
    } else {
      break;
    }
    if (!cmp) {
      cmp = make(NodeKind::Compare, at);
      cmp->kids.push_back(std::move(expr));
    }
    cmp->ops.push_back(op);
    cmp->kids.push_back(parse_math1());
  }
  return cmp ? std::move(cmp) : std::move(expr);
}

NodePtr Parser::parse_math1() {
  return parse_left_assoc(NodeKind::Binary, {"+", "-"}, [this] { return parse_concat(); });
}

NodePtr Parser::parse_concat() {
  return parse_left_assoc(NodeKind::Binary, {"~"}, [this] { return parse_math2(); });
}

NodePtr Parser::parse_math2() {
  return parse_left_assoc(NodeKind::Binary, {"*", "/", "//", "%"}, [this] { return parse_pow(); });
}

NodePtr Parser::parse_pow() {
  return parse_left_assoc(NodeKind::Binary, {"**"}, [this] { return parse_unary(true); });
}

NodePtr Parser::parse_unary(bool with_filter) {
  DepthGuard g(*this);
  NodePtr node;
  if (is_op("-") || is_op("+")) {
    const Token& at = next();
    node = make(NodeKind::Unary, at);
    node->name = at.text;
    node->kids.push_back(parse_unary(false));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

NodePtr Parser::parse_primary() {
  const Token& t = cur();
  if (t.type == Tok::Name) {
    next();
    if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
      auto n = make(NodeKind::Const, t);
      n->value = Value::boolean(t.text[0] == 't' || t.text[0] == 'T');
      return n;
    }
    if (t.text == "none" || t.text == "None") {
      auto n = make(NodeKind::Const, t);
      n->value = Value::none();
      return n;
    }
    auto n = make(NodeKind::Name, t);
    n->name = t.text;
    return n;
  }
  if (t.type == Tok::String) {
    std::string s = next().text;
    while (cur().type == Tok::String) s += next().text;
    auto n = make(NodeKind::Const, t);
    n->value = Value::string(std::move(s));
    return n;
  }
  if (t.type == Tok::Integer || t.type == Tok::Float) {
    next();
    auto n = make(NodeKind::Const, t);
    n->value = t.type == Tok::Integer ? Value::integer(t.ival) : Value::number(t.fval);
    return n;
  }
  if (is_op("(")) {
    next();
    NodePtr n = parse_tuple(false, true, {}, true);
    expect_op(")");
    return n;
  }
  if (is_op("[")) return parse_list();
  if (is_op("{")) return parse_dict();
  fail("unexpected '" + describe(t) + "'");
}

bool Parser::is_tuple_end(const std::vector<std::string>& extra_end) const {
  if (cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || cur().type == Tok::Eof ||
      is_op(")")) {
    return true;
  }
  for (const auto& e : extra_end) {
    if (is_name(e.c_str())) return true;
  }
  return false;
}

NodePtr Parser::parse_tuple(bool simplified, bool with_condexpr,
                            const std::vector<std::string>& extra_end, bool explicit_parens) {
  const Token& at = cur();
  std::vector<NodePtr> args;
  bool is_tuple = false;
  while (true) {
    if (!args.empty()) expect_op(",");
    if (is_tuple_end(extra_end)) break;
    args.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
    if (is_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!args.empty()) return std::move(args[0]);
    if (!explicit_parens) fail("Expected an expression, got '" + describe(cur()) + "'");
  }
  auto n = make(NodeKind::TupleLit, at);
  n->kids = std::move(args);
  return n;
}

NodePtr Parser::parse_list() {
  auto n = make(NodeKind::ListLit, expect_op("["));
  while (!is_op("]")) {
    if (!n->kids.empty()) expect_op(",");
    if (is_op("]")) break;
    n->kids.push_back(parse_expression());
  }
  expect_op("]");
  return n;
}

NodePtr Parser::parse_dict() {
  auto n = make(NodeKind::DictLit, expect_op("{"));
  while (!is_op("}")) {
    if (!n->kids.empty()) expect_op(",");
    if (is_op("}")) break;
    n->kids.push_back(parse_expression());
    expect_op(":");
    n->kids.push_back(parse_expression());
  }
  expect_op("}");
  return n;
}

// callee(args...)
NodePtr Parser::parse_call(NodePtr callee) {
  auto call = make(NodeKind::Call, cur());
  call->kids.push_back(std::move(callee));
  parse_call_args(*call);
  return call;
}

NodePtr Parser::parse_postfix(NodePtr node) {
  while (true) {
    if (is_op(".") || is_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

NodePtr Parser::parse_filter_expr(NodePtr node) {
  while (true) {
    if (is_op("|")) {
      node = parse_filter(std::move(node), false);
    } else if (is_name("is")) {
      node = parse_test(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

NodePtr Parser::parse_subscript(NodePtr node) {
  DepthGuard g(*this);
  const Token& at = next();
  if (at.text == ".") {
    const Token& attr = cur();
    if (attr.type == Tok::Name) {
      next();
      auto n = make(NodeKind::Getattr, at);
      n->kids.push_back(std::move(node));
      n->name = attr.text;
      return n;
    }
    if (attr.type != Tok::Integer) fail("expected name or number");
    next();
    auto n = make(NodeKind::Getitem, at);
    n->kids.push_back(std::move(node));
    auto idx = make(NodeKind::Const, attr);
    idx->value = Value::integer(attr.ival);
    n->kids.push_back(std::move(idx));
    return n;
  }
  std::vector<NodePtr> args;
  while (!is_op("]")) {
    if (!args.empty()) expect_op(",");
    args.push_back(parse_subscribed());
  }
  expect_op("]");
  auto n = make(NodeKind::Getitem, at);
  n->kids.push_back(std::move(node));
  if (args.size() == 1) {
    n->kids.push_back(std::move(args[0]));
  } else {
    auto tup = make(NodeKind::TupleLit, at);
    tup->kids = std::move(args);
    n->kids.push_back(std::move(tup));
  }
  return n;
}

NodePtr Parser::parse_subscribed() {
  const Token& at = cur();
  std::vector<NodePtr> args;
  if (is_op(":")) {
    next();
    args.push_back(nullptr);
  } else {
    NodePtr node = parse_expression();
    if (!is_op(":")) return node;
    next();
    args.push_back(std::move(node));
  }
  if (is_op(":")) {
    args.push_back(nullptr);
  } else if (!is_op("]") && !is_op(",")) {
    args.push_back(parse_expression());
  } else {
    args.push_back(nullptr);
  }
  if (is_op(":")) {
    next();
    args.push_back(!is_op("]") && !is_op(",") ? parse_expression() : nullptr);
  } else {
    args.push_back(nullptr);
  }
  auto n = make(NodeKind::Slice, at);
  n->kids = std::move(args);
  return n;
}

void Parser::parse_call_args(Node& call) {
  const Token& open = expect_op("(");
  bool require_comma = false;
  while (!is_op(")")) {
    if (require_comma) {
      expect_op(",");
      if (is_op(")")) break;
    }
    if (is_op("*") || is_op("**")) {
      const bool kw = next().text == "**";
      if ((kw ? call.star_kwargs : call.star_args) || (!kw && call.star_kwargs)) {
        fail("invalid syntax for function call expression", open);
      }
      (kw ? call.star_kwargs : call.star_args) = parse_expression();
    } else if (cur().type == Tok::Name && look().type == Tok::Op && look().text == "=") {
      if (call.star_kwargs) fail("invalid syntax for function call expression", open);
      std::string key = next().text;
      next();
      call.kwargs.emplace_back(std::move(key), parse_expression());
    } else {
      if (call.star_args || call.star_kwargs || !call.kwargs.empty()) {
        fail("invalid syntax for function call expression", open);
      }
      call.kids.push_back(parse_expression());
    }
    require_comma = true;
  }
  expect_op(")");
}

NodePtr Parser::parse_filter(NodePtr node, bool start_inline) {
  while (is_op("|") || start_inline) {
    if (!start_inline) next();
    const Token& tok = expect_name();
    std::string name = tok.text;
    while (is_op(".")) {
      next();
      name += "." + expect_name().text;
    }
    auto n = make(NodeKind::Filter, tok);
    n->name = name;
    n->kids.push_back(std::move(node));
    if (is_op("(")) parse_call_args(*n);
    node = std::move(n);
    start_inline = false;
  }
  return node;
}

NodePtr Parser::parse_test(NodePtr node) {
  const Token& at = next();  // 'is'
  const bool negated = skip_name("not");
  const Token& tok = expect_name();
  std::string name = tok.text;
  while (is_op(".")) {
    next();
    name += "." + expect_name().text;
  }
  auto n = make(NodeKind::Test, at);
  n->name = name;
  n->kids.push_back(std::move(node));
  const Token& c = cur();
  if (is_op("(")) {
    parse_call_args(*n);
  } else if ((c.type == Tok::Name || c.type == Tok::String || c.type == Tok::Integer ||
              c.type == Tok::Float || is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) fail("You cannot chain multiple tests with is");
    n->kids.push_back(parse_postfix(parse_primary()));
  }
  if (!negated) return n;
  auto neg = make(NodeKind::Unary, at);
  neg->name = "not";
  neg->kids.push_back(std::move(n));
  return neg;
}

}  // namespace invar::chat
