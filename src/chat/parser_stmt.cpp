// Statements: text, {{ }}, and the tags of jinja2's core language that chat templates use.
#include "chat/builtins.h"
#include "chat/parser_state.h"
#include "chat/template_error.h"

namespace invar::chat {
namespace {

bool any_name(const Node* n, const char* name) {
  if (!n) return false;
  if (n->kind == NodeKind::Name && n->name == name) return true;
  for (const auto& k : n->kids) {
    if (any_name(k.get(), name)) return true;
  }
  for (const auto& [k, v] : n->kwargs) {
    if (any_name(v.get(), name)) return true;
  }
  for (const auto* list : {&n->body, &n->orelse, &n->defaults}) {
    for (const auto& k : *list) {
      if (any_name(k.get(), name)) return true;
    }
  }
  return any_name(n->star_args.get(), name) || any_name(n->star_kwargs.get(), name);
}

bool body_uses(const std::vector<NodePtr>& body, const char* name) {
  for (const auto& n : body) {
    if (any_name(n.get(), name)) return true;
  }
  return false;
}

}  // namespace

std::vector<NodePtr> Parser::parse_template() {
  std::vector<NodePtr> body = subparse({});
  if (cur().type != Tok::Eof) fail("unexpected '" + describe(cur()) + "'");
  return body;
}

std::vector<NodePtr> Parser::subparse(const std::vector<std::string>& end_names) {
  std::vector<NodePtr> body;
  while (cur().type != Tok::Eof) {
    const Token& t = cur();
    if (t.type == Tok::Data) {
      auto n = make(NodeKind::Output, t);
      n->name = t.text;
      body.push_back(std::move(n));
      next();
    } else if (t.type == Tok::VarBegin) {
      next();
      auto n = make(NodeKind::Print, t);
      n->kids.push_back(parse_tuple());
      expect(Tok::VarEnd);
      body.push_back(std::move(n));
    } else if (t.type == Tok::BlockBegin) {
      next();
      for (const auto& e : end_names) {
        if (is_name(e.c_str())) return body;
      }
      NodePtr n = parse_statement();
      if (n) body.push_back(std::move(n));
      expect(Tok::BlockEnd);
    } else {
      fail("unexpected '" + describe(t) + "'");
    }
  }
  return body;
}

std::vector<NodePtr> Parser::parse_statements(const std::vector<std::string>& end_names,
                                              bool drop_needle) {
  skip_op(":");
  expect(Tok::BlockEnd);
  std::vector<NodePtr> body = subparse(end_names);
  if (cur().type == Tok::Eof) {
    std::string want;
    for (const auto& e : end_names) want += (want.empty() ? "'" : " or '") + e + "'";
    fail("Unexpected end of template. Jinja was looking for the following tags: " + want + ".");
  }
  if (drop_needle) next();
  return body;
}

NodePtr Parser::parse_statement() {
  DepthGuard g(*this);
  const Token& t = cur();
  if (t.type != Tok::Name) fail("tag name expected");
  const std::string& w = t.text;
  if (w == "for") return parse_for();
  if (w == "if") return parse_if();
  if (w == "set") return parse_set();
  if (w == "macro") return parse_macro();
  if (w == "call") return parse_call_block();
  if (w == "filter") return parse_filter_block();
  if (w == "with") return parse_with();
  if (w == "break" || w == "continue") {
    next();
    return make(w == "break" ? NodeKind::Break : NodeKind::Continue, t);
  }
  if (w == "print") {
    next();
    auto n = make(NodeKind::Print, t);
    n->kids.push_back(parse_tuple());
    return n;
  }
  if (w == "generation") {  // transformers' AssistantTracker: renders its body as is
    next();
    auto n = make(NodeKind::With, t);
    n->body = parse_statements({"endgeneration"}, true);
    return n;
  }
  fail("Encountered unknown tag '" + w + "'.");
}

NodePtr Parser::parse_assign_target(bool with_tuple, const std::vector<std::string>& extra_end,
                                    bool with_namespace) {
  const Token& at = cur();
  if (with_namespace && at.type == Tok::Name && look().type == Tok::Op && look().text == ".") {
    next();
    next();
    auto n = make(NodeKind::NsRef, at);
    n->name = at.text;
    n->attr = expect_name().text;
    return n;
  }
  NodePtr target = with_tuple ? parse_tuple(true, true, extra_end) : parse_primary();
  auto assignable = [](const Node& n) { return n.kind == NodeKind::Name; };
  bool ok = assignable(*target);
  if (target->kind == NodeKind::TupleLit) {
    ok = true;
    for (const auto& k : target->kids) ok = ok && assignable(*k);
  }
  if (!ok) fail("can't assign to this expression", at);
  return target;
}

NodePtr Parser::parse_for() {
  auto n = make(NodeKind::For, next());
  n->kids.push_back(parse_assign_target(true, {"in"}, false));
  expect_name("in");
  n->kids.push_back(parse_tuple(false, false, {"recursive"}));
  n->kids.push_back(skip_name("if") ? parse_expression() : nullptr);
  if (is_name("recursive")) fail("recursive loops are not supported");
  n->body = parse_statements({"endfor", "else"}, false);
  if (next().text == "else") n->orelse = parse_statements({"endfor"}, true);
  return n;
}

NodePtr Parser::parse_if() {
  auto n = make(NodeKind::If, next());
  n->kids.push_back(parse_tuple(false, false));
  n->body = parse_statements({"elif", "else", "endif"}, false);
  const Token& t = next();
  if (t.text == "elif") {
    pos_--;  // re-read `elif` as the `if` of a nested node
    NodePtr inner = parse_if();
    n->orelse.push_back(std::move(inner));
  } else if (t.text == "else") {
    n->orelse = parse_statements({"endif"}, true);
  }
  return n;
}

NodePtr Parser::parse_set() {
  const Token& at = next();
  NodePtr target = parse_assign_target(true, {}, true);
  if (skip_op("=")) {
    auto n = make(NodeKind::Set, at);
    n->kids.push_back(std::move(target));
    n->kids.push_back(parse_tuple());
    return n;
  }
  auto n = make(NodeKind::SetBlock, at);
  n->kids.push_back(std::move(target));
  n->kids.push_back(is_op("|") ? parse_filter(nullptr, false) : nullptr);
  n->body = parse_statements({"endset"}, true);
  return n;
}

void Parser::parse_signature(Node& node) {
  expect_op("(");
  while (!is_op(")")) {
    if (!node.params.empty()) expect_op(",");
    node.params.push_back(expect_name().text);
    if (skip_op("=")) {
      node.defaults.push_back(parse_expression());
    } else {
      if (!node.defaults.empty() && node.defaults.back()) {
        fail("non-default argument follows default argument");
      }
      node.defaults.push_back(nullptr);
    }
  }
  expect_op(")");
}

NodePtr Parser::parse_macro() {
  auto n = make(NodeKind::Macro, next());
  n->name = expect_name().text;
  parse_signature(*n);
  n->body = parse_statements({"endmacro"}, true);
  n->uses_caller = body_uses(n->body, "caller");
  n->uses_varargs = body_uses(n->body, "varargs");
  n->uses_kwargs = body_uses(n->body, "kwargs");
  return n;
}

NodePtr Parser::parse_call_block() {
  auto n = make(NodeKind::CallBlock, next());
  if (is_op("(")) parse_signature(*n);
  NodePtr call = parse_expression();
  if (call->kind != NodeKind::Call) fail("expected call", cur());
  n->kids.push_back(std::move(call));
  n->body = parse_statements({"endcall"}, true);
  n->uses_caller = body_uses(n->body, "caller");
  n->uses_varargs = body_uses(n->body, "varargs");
  n->uses_kwargs = body_uses(n->body, "kwargs");
  return n;
}

NodePtr Parser::parse_filter_block() {
  auto n = make(NodeKind::FilterBlock, next());
  n->kids.push_back(parse_filter(nullptr, true));
  n->body = parse_statements({"endfilter"}, true);
  return n;
}

NodePtr Parser::parse_with() {
  auto n = make(NodeKind::With, next());
  std::vector<NodePtr> values;
  while (cur().type != Tok::BlockEnd) {
    if (!n->params.empty()) expect_op(",");
    n->params.push_back(expect_name().text);
    expect_op("=");
    values.push_back(parse_expression());
  }
  n->kids = std::move(values);
  n->body = parse_statements({"endwith"}, true);
  return n;
}

namespace {

// jinja2 reports an unknown filter or test when it compiles the template, except inside an
// `if` or an inline if-expression (a "soft" frame), where it waits until the call runs.
// Frames of their own (loops, macros, blocks) are never soft.
void check_names(const Node* n, bool soft) {
  if (!n) return;
  if ((n->kind == NodeKind::Filter && !filter_exists(n->name)) ||
      (n->kind == NodeKind::Test && !test_exists(n->name))) {
    if (!soft) {
      throw TemplateError(TemplateError::Kind::Syntax,
                          std::string("No ") + (n->kind == NodeKind::Filter ? "filter" : "test") +
                              " named '" + n->name + "'.",
                          n->line, n->col);
    }
  }
  const bool kids_soft = soft || n->kind == NodeKind::If || n->kind == NodeKind::CondExpr;
  const bool own_frame = n->kind == NodeKind::For || n->kind == NodeKind::Macro ||
                         n->kind == NodeKind::CallBlock || n->kind == NodeKind::FilterBlock ||
                         n->kind == NodeKind::With || n->kind == NodeKind::SetBlock;
  for (size_t k = 0; k < n->kids.size(); ++k) {
    // a for loop's iterable and a with's values belong to the enclosing frame
    const bool outer = (n->kind == NodeKind::For && k == 1) || n->kind == NodeKind::With ||
                       n->kind == NodeKind::CallBlock;
    check_names(n->kids[k].get(), own_frame && !outer ? false : kids_soft);
  }
  for (const auto& [key, v] : n->kwargs) check_names(v.get(), kids_soft);
  check_names(n->star_args.get(), kids_soft);
  check_names(n->star_kwargs.get(), kids_soft);
  for (const auto& d : n->defaults) check_names(d.get(), false);
  for (const auto& b : n->body) check_names(b.get(), own_frame ? false : kids_soft);
  for (const auto& b : n->orelse) check_names(b.get(), own_frame ? false : kids_soft);
}

}  // namespace

std::vector<NodePtr> parse(const std::vector<Token>& tokens, const ParseLimits& limits) {
  Parser p(tokens, limits);
  std::vector<NodePtr> body = p.parse_template();
  for (const auto& n : body) check_names(n.get(), false);
  return body;
}

}  // namespace invar::chat
