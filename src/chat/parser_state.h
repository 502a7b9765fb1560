// The parser's token cursor and node helpers, shared by the expression and statement halves.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "chat/ast.h"
#include "chat/lexer.h"
#include "chat/parser.h"

namespace invar::chat {

class Parser {
 public:
  Parser(const std::vector<Token>& toks, const ParseLimits& limits)
      : toks_(toks), limits_(limits) {}

  std::vector<NodePtr> parse_template();

  // expressions (parser_expr.cpp)
  NodePtr parse_expression(bool with_condexpr = true);
  NodePtr parse_tuple(bool simplified = false, bool with_condexpr = true,
                      const std::vector<std::string>& extra_end = {}, bool explicit_parens = false);
  NodePtr parse_primary();
  NodePtr parse_call(NodePtr callee);
  NodePtr parse_postfix(NodePtr node);
  NodePtr parse_filter(NodePtr node, bool start_inline);
  void parse_call_args(Node& call);

 private:
  const std::vector<Token>& toks_;
  ParseLimits limits_;
  size_t pos_ = 0;
  int depth_ = 0;

  friend struct DepthGuard;

  NodePtr parse_condexpr();
  template <class Operand>
  NodePtr parse_left_assoc(NodeKind kind, std::initializer_list<const char*> ops, Operand operand);
  NodePtr parse_or();
  NodePtr parse_and();
  NodePtr parse_not();
  NodePtr parse_compare();
  NodePtr parse_math1();
  NodePtr parse_concat();
  NodePtr parse_math2();
  NodePtr parse_pow();
  NodePtr parse_unary(bool with_filter);
  NodePtr parse_filter_expr(NodePtr node);
  NodePtr parse_test(NodePtr node);
  NodePtr parse_subscript(NodePtr node);
  NodePtr parse_subscribed();
  NodePtr parse_list();
  NodePtr parse_dict();
  bool is_tuple_end(const std::vector<std::string>& extra_end) const;

  // statements (parser_stmt.cpp)
  std::vector<NodePtr> subparse(const std::vector<std::string>& end_names);
  std::vector<NodePtr> parse_statements(const std::vector<std::string>& end_names,
                                        bool drop_needle);
  NodePtr parse_statement();
  NodePtr parse_for();
  NodePtr parse_if();
  NodePtr parse_set();
  NodePtr parse_macro();
  NodePtr parse_call_block();
  NodePtr parse_filter_block();
  NodePtr parse_with();
  NodePtr parse_assign_target(bool with_tuple, const std::vector<std::string>& extra_end,
                              bool with_namespace);
  void parse_signature(Node& node);

 public:
  // cursor
  const Token& cur() const { return toks_[pos_]; }
  const Token& look() const { return toks_[pos_ + 1 < toks_.size() ? pos_ + 1 : pos_]; }
  const Token& next() { return toks_[pos_ < toks_.size() - 1 ? pos_++ : pos_]; }
  bool is_op(const char* op) const { return cur().type == Tok::Op && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == Tok::Name && cur().text == n; }
  bool skip_op(const char* op);
  bool skip_name(const char* n);
  const Token& expect_op(const char* op);
  const Token& expect_name(const char* n = nullptr);
  const Token& expect(Tok t);
  [[noreturn]] void fail(const std::string& msg, const Token& at) const;
  [[noreturn]] void fail(const std::string& msg) const { fail(msg, cur()); }
  NodePtr make(NodeKind k, const Token& at) const;
  void enter();
  void leave() { --depth_; }
};

// Nesting depth of the recursive descent, bounded so hostile input ends in an error.
struct DepthGuard {
  explicit DepthGuard(Parser& p) : p_(p) { p_.enter(); }
  ~DepthGuard() { p_.leave(); }
  Parser& p_;
};

std::string describe(const Token& t);

}  // namespace invar::chat
