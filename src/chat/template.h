// A chat template compiled once and rendered many times: the public face of src/chat.
//
//   chat::Template t(source);                 // throws chat::TemplateError (syntax)
//   std::string prompt = t.render(context);   // throws chat::TemplateError (runtime / raised)
//
// Rendering follows Python's jinja2 as Hugging Face transformers configures it
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, its tojson,
// raise_exception and strftime_now).
#pragma once

#include <ctime>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "chat/ast.h"
#include "chat/eval.h"
#include "chat/lexer.h"
#include "chat/parser.h"
#include "chat/template_error.h"

namespace invar::chat {

struct TemplateOptions {
  LexOptions lex;
  ParseLimits parse;
  RenderLimits render;
};

class Template {
 public:
  explicit Template(const std::string& source, const TemplateOptions& opt = {});
  // context: a JSON object whose keys become template variables (insertion order kept).
  // now: the time strftime_now() formats; the local time when absent.
  std::string render(const nlohmann::ordered_json& context,
                     const std::optional<std::tm>& now = std::nullopt) const;

 private:
  std::vector<NodePtr> body_;
  TemplateOptions opt_;
};

// JSON -> template values, objects in insertion order; nesting deeper than max_depth is an
// error (chat::EvalError).
Value value_from_json(const nlohmann::ordered_json& j, int max_depth = 256);
// Python's datetime.strftime for a broken-down time (C locale).
std::string format_time(const std::tm& t, const std::string& format);

}  // namespace invar::chat
