// Template source -> tokens, as jinja2's lexer produces them with trim_blocks and lstrip_blocks
// (transformers' settings): newlines normalised to \n, one trailing newline dropped,
// whitespace control by `-` / `+`, comments dropped and raw blocks turned into text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace invar::chat {

enum class Tok : uint8_t {
  Data,        // literal template text
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,
  String,  // text holds the unescaped value
  Integer,
  Float,
  Op,  // text holds the operator: + - * / // % ** ~ ( ) [ ] { } == != < <= > >= = . : | , ;
  Eof,
};

struct Token {
  Tok type;
  std::string text;
  int64_t ival = 0;
  double fval = 0;
  int line = 1, col = 1;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Throws TemplateError (syntax) with line and column for malformed input.
std::vector<Token> lex(const std::string& source, const LexOptions& opt = {});

}  // namespace invar::chat
