// The engine's pieces on small templates: tokens, error positions, error kinds, Python value
// formatting, and the limits that make hostile templates and inputs end in an error.
// (Rendering semantics are compared with jinja2 itself in jinja2_compare_test.cpp.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/chat_request.h"
#include "chat/lexer.h"
#include "chat/py_string.h"
#include "chat/template.h"

namespace engine_test {

using invar::chat::Template;
using invar::chat::TemplateError;
using ojson = nlohmann::ordered_json;

std::string render(const std::string& src, const ojson& ctx = ojson::object(),
                   const invar::chat::TemplateOptions& opt = {}) {
  return Template(src, opt).render(ctx);
}

// The error a template ends with; fails the test if it renders.
TemplateError error_of(const std::string& src, const ojson& ctx = ojson::object(),
                       const invar::chat::TemplateOptions& opt = {}) {
  try {
    const std::string out = render(src, ctx, opt);
    ADD_FAILURE() << "rendered instead of failing: " << out.substr(0, 200);
  } catch (const TemplateError& e) {
    return e;
  }
  return TemplateError(TemplateError::Kind::Runtime, "none", 0, 0);
}

TEST(ChatLexer, TokensWithPositionsAndWhitespaceControl) {
  const auto toks = invar::chat::lex("a  {{- x.y -}}  b\n{% if z %}\nc");
  ASSERT_GE(toks.size(), 10u);
  EXPECT_EQ(toks[0].type, invar::chat::Tok::Data);
  EXPECT_EQ(toks[0].text, "a");  // `{{-` strips the spaces before it
  EXPECT_EQ(toks[1].type, invar::chat::Tok::VarBegin);
  EXPECT_EQ(toks[2].text, "x");
  EXPECT_EQ(toks[2].line, 1);
  EXPECT_EQ(toks[2].col, 8);
  EXPECT_EQ(toks[6].type, invar::chat::Tok::Data);
  EXPECT_EQ(toks[6].text, "b\n");  // `-}}` strips the spaces after it
  EXPECT_EQ(toks[8].text, "if");
  EXPECT_EQ(toks[8].line, 2);
  EXPECT_EQ(toks.back().type, invar::chat::Tok::Eof);
}

TEST(ChatTemplate, SyntaxErrorsCarryLineAndColumn) {
  const TemplateError e = error_of("line one\n{% if x %}\n  {{ 1 + }}\n{% endif %}");
  EXPECT_EQ(e.kind(), TemplateError::Kind::Syntax);
  EXPECT_EQ(e.line(), 3);
  EXPECT_NE(std::string(e.what()).find("line 3, column"), std::string::npos) << e.what();
  const TemplateError unclosed = error_of("{% for x in y %}\nno end");
  EXPECT_NE(std::string(unclosed.what()).find("endfor"), std::string::npos) << unclosed.what();
  const TemplateError filter = error_of("\n\n  {{ x | no_such_filter }}");
  EXPECT_EQ(filter.line(), 3);
  EXPECT_NE(std::string(filter.what()).find("No filter named 'no_such_filter'"), std::string::npos);
}

TEST(ChatTemplate, RuntimeErrorsCarryLineAndColumn) {
  const TemplateError e =
      error_of("ok\n  {{ messages[0].content + 1 }}", {{"messages", {{{"content", "hi"}}}}});
  EXPECT_EQ(e.kind(), TemplateError::Kind::Runtime);
  EXPECT_EQ(e.line(), 2);
  EXPECT_NE(std::string(e.what()).find("unsupported operand"), std::string::npos) << e.what();
  const TemplateError u = error_of("{{ nothing.here }}");
  EXPECT_NE(std::string(u.what()).find("'nothing' is undefined"), std::string::npos) << u.what();
}

TEST(ChatTemplate, RaiseExceptionGivesTheTemplatesMessage) {
  const TemplateError e =
      error_of("{% if not messages %}{{ raise_exception('No messages provided.') }}{% endif %}",
               {{"messages", ojson::array()}});
  EXPECT_EQ(e.kind(), TemplateError::Kind::Raised);
  EXPECT_STREQ(e.what(), "No messages provided.");
}

TEST(ChatTemplate, RendersTheSameTwiceAndKeepsContextOrder) {
  const Template t("{% for k, v in d.items() %}{{ k }}{{ v }}{% endfor %}|{{ d | tojson }}");
  const ojson ctx = {{"d", ojson::parse(R"({"z": 1, "a": [1.0, "é"], "m": null})")}};
  const std::string once = t.render(ctx);
  EXPECT_EQ(once, "z1a[1.0, 'é']mNone|{\"z\": 1, \"a\": [1.0, \"é\"], \"m\": null}");
  EXPECT_EQ(t.render(ctx), once);
}

TEST(ChatTemplate, StrftimeNowUsesTheGivenTime) {
  const Template t("{{ strftime_now('%Y-%m-%d %A %B %d, %Y') }}");
  std::tm now = invar::chat::parse_iso8601("2026-03-14T15:09:26");
  EXPECT_EQ(t.render(ojson::object(), now), "2026-03-14 Saturday March 14, 2026");
}

TEST(ChatValues, PythonFloatRepr) {
  using invar::chat::float_repr;
  EXPECT_EQ(float_repr(1.0), "1.0");
  EXPECT_EQ(float_repr(0.1), "0.1");
  EXPECT_EQ(float_repr(1e16), "1e+16");
  EXPECT_EQ(float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(float_repr(1e-5), "1e-05");
  EXPECT_EQ(float_repr(0.0001), "0.0001");
  EXPECT_EQ(float_repr(-2.5e-300), "-2.5e-300");
  EXPECT_EQ(float_repr(123456789.125), "123456789.125");
}

TEST(ChatValues, PythonStringOperations) {
  using namespace invar::chat;
  EXPECT_EQ(py_strip("\xc2\xa0 x \xe3\x80\x80", std::nullopt, true, true), "x");  // NBSP, U+3000
  EXPECT_EQ(py_split(" a  b ", std::nullopt, -1, false), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(py_split("a,b,c", std::string(","), 1, true), (std::vector<std::string>{"a,b", "c"}));
  EXPECT_EQ(py_splitlines("a\r\nb\n\nc"), (std::vector<std::string>{"a", "b", "", "c"}));
  EXPECT_EQ(py_find("h\xc3\xa9llo", "l"), 2);  // code points, not bytes
  EXPECT_EQ(py_upper_str("stra\xc3\x9f"
                         "e"),
            "STRASSE");
}

// Hostile templates end in an error within the limits: no crash, no unbounded allocation.
TEST(ChatLimits, DeepNestingIsASyntaxError) {
  EXPECT_EQ(error_of("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}").kind(),
            TemplateError::Kind::Syntax);
  std::string ifs;
  for (int k = 0; k < 3000; ++k) ifs += "{% if true %}";
  for (int k = 0; k < 3000; ++k) ifs += "{% endif %}";
  EXPECT_NE(std::string(error_of(ifs).what()).find("nested too deeply"), std::string::npos);
  EXPECT_EQ(error_of("{{ " + std::string(5000, '-') + "1 }}").kind(), TemplateError::Kind::Syntax);
  EXPECT_EQ(error_of("{{ x" + std::string(20000, '|') + " }}").kind(), TemplateError::Kind::Syntax);
}

TEST(ChatLimits, HugeLoopsHitTheStepLimit) {
  const TemplateError e = error_of(
      "{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}{% endfor %}{% endfor %}");
  EXPECT_NE(std::string(e.what()).find("limit"), std::string::npos) << e.what();
}

TEST(ChatLimits, UnboundedRecursionIsAnError) {
  const TemplateError e = error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_NE(std::string(e.what()).find("RecursionError"), std::string::npos) << e.what();
}

TEST(ChatLimits, DeepRecursionThroughNestedBlocksIsAnError) {
  // Each macro level nests 100 blocks: the evaluation depth limit ends it before the stack.
  std::string body;
  for (int k = 0; k < 100; ++k) body += "{% if true %}";
  body += "{{ f(n + 1) }}";
  for (int k = 0; k < 100; ++k) body += "{% endif %}";
  const TemplateError e = error_of("{% macro f(n) %}" + body + "{% endmacro %}{{ f(0) }}");
  EXPECT_NE(std::string(e.what()).find("RecursionError"), std::string::npos) << e.what();
}

TEST(ChatLimits, HugeStringsAndListsAreRefused) {
  EXPECT_NE(std::string(error_of("{{ 'x' * 10000000000000 }}").what()).find("too large"),
            std::string::npos);
  // Repeated doubling through a namespace: each step is small, the total is not.
  const TemplateError grow = error_of(
      "{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(100) %}"
      "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}");
  EXPECT_NE(std::string(grow.what()).find("limit"), std::string::npos) << grow.what();
  // Shared sub-lists: linear memory, exponential repr; stopped by the work limit.
  const TemplateError bomb = error_of(
      "{% set a = [1] * 1000 %}{% set b = [a] * 1000 %}{% set c = [b] * 1000 %}"
      "{% set d = [c] * 1000 %}{{ d }}");
  EXPECT_EQ(bomb.kind(), TemplateError::Kind::Runtime);
  const TemplateError rep = error_of("{{ ('x' * 1000000) * 100 }}");
  EXPECT_NE(std::string(rep.what()).find("limit"), std::string::npos) << rep.what();
  EXPECT_NE(std::string(error_of("{{ range(1000000) | list }}").what()).find("Range too big"),
            std::string::npos);
}

TEST(ChatLimits, SelfReferenceAndDeepInputAreErrors) {
  const TemplateError self = error_of("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}");
  EXPECT_NE(std::string(self.what()).find("nested too deeply"), std::string::npos) << self.what();
  std::string deep;
  for (int k = 0; k < 2000; ++k) deep += "[";
  for (int k = 0; k < 2000; ++k) deep += "]";
  const TemplateError input = error_of("{{ x }}", {{"x", ojson::parse(deep)}});
  EXPECT_NE(std::string(input.what()).find("nested too deeply"), std::string::npos);
}

// Namespaces that hold themselves (directly, through a list, dict or macro, or through each
// other) are reference cycles; the render frees them when it ends, whether it succeeds or fails.
// LeakSanitizer (`make test-asan`) fails this test if one of them outlives its render.
TEST(ChatLimits, SelfReferencingNamespacesAreFreed) {
  EXPECT_EQ(render("{% set ns = namespace(n=1) %}{% set ns.me = ns %}{{ ns.me.me.me.n }}"), "1");
  EXPECT_EQ(
      render("{% set ns = namespace() %}{% set ns.xs = [ns, [ns]] %}"
             "{% set ns.d = {'k': ns} %}{{ ns.xs | length }}{{ ns.d.k.xs[1][0] is defined }}"),
      "2True");
  EXPECT_EQ(
      render("{% set a = namespace() %}{% set b = namespace(a=a) %}{% set a.b = b %}"
             "{% macro m() %}{{ a.b.a is defined }}{% endmacro %}{% set a.m = m %}{{ a.m() }}"),
      "True");
  EXPECT_EQ(
      render("{% set ns = namespace(all=[]) %}{% for i in range(200) %}"
             "{% set n = namespace(i=i) %}{% set n.owner = ns %}{% set ns.all = ns.all + [n] %}"
             "{% endfor %}{{ ns.all | length }}"),
      "200");
  const TemplateError failed =
      error_of("{% set ns = namespace() %}{% set ns.me = [ns] %}{{ raise_exception('stop') }}");
  EXPECT_EQ(failed.kind(), TemplateError::Kind::Raised);
}

// Lists, then dicts and lists, nested 200000 deep through a namespace (ten levels per loop
// iteration): freeing them must not recurse once per level, which overflows the stack.
TEST(ChatLimits, DeeplyNestedValuesAreFreedWithoutRecursion) {
  const std::string lists =
      "{% set ns = namespace(x=none) %}{% for i in range(20000) %}"
      "{% set ns.x = [[[[[[[[[[ns.x]]]]]]]]]] %}{% endfor %}";
  EXPECT_EQ(render(lists + "{{ ns.x | length }}{{ ns.x[0][0][0][0][0][0][0][0][0] | length }}"),
            "11");
  const std::string mixed =
      "{% set ns = namespace(x=none) %}{% for i in range(20000) %}"
      "{% set ns.x = {'k': [{'k': [{'k': [{'k': [{'k': [ns.x]}]}]}]}]} %}"
      "{% endfor %}";
  EXPECT_EQ(render(mixed + "{{ ns.x.k[0].k[0] is mapping }}"), "True");
}

TEST(ChatLimits, OutputLimitIsConfigurable) {
  invar::chat::TemplateOptions opt;
  opt.render.max_string_bytes = 1000;
  EXPECT_EQ(render("{% for i in range(10) %}0123456789{% endfor %}", ojson::object(), opt).size(),
            100u);
  const TemplateError e =
      error_of("{% for i in range(1000) %}0123456789{% endfor %}", ojson::object(), opt);
  EXPECT_NE(std::string(e.what()).find("output longer than the limit"), std::string::npos);
}

TEST(ChatSandbox, MutatingMethodsAreRefused) {
  const ojson ctx = {{"xs", {1, 2}}, {"d", {{"a", 1}}}};
  EXPECT_NE(std::string(error_of("{{ xs.append(3) }}", ctx).what()).find("unsafe"),
            std::string::npos);
  EXPECT_NE(std::string(error_of("{{ d.pop('a') }}", ctx).what()).find("unsafe"),
            std::string::npos);
  EXPECT_EQ(render("{{ xs.append is defined }}{{ xs }}", ctx), "True[1, 2]");
}

}  // namespace engine_test
