// GBNF, regex and choice front ends: positive and negative strings, full match (accept_bytes
// of the whole string, then is_accepting), and the errors that name what is refused.
#include <gtest/gtest.h>

#include "grammar/error.h"
#include "grammar_test_util.h"

namespace invar::grammar {
namespace {

using test::full_match;

struct Case {
  std::string text;
  bool match;
};

void expect_cases(Kind kind, const std::string& src, const std::vector<Case>& cases) {
  auto g = compile(kind, src);
  for (const auto& c : cases) {
    EXPECT_EQ(full_match(g, c.text), c.match)
        << kind_name(kind) << " " << src << " on '" << c.text << "'";
  }
}

void expect_error(Kind kind, const std::string& src, const std::string& needle) {
  try {
    compile(kind, src);
    ADD_FAILURE() << kind_name(kind) << " '" << src << "' compiled; expected an error naming '"
                  << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(GrammarGbnf, RulesAlternationGroupsQuantifiers) {
  expect_cases(
      Kind::gbnf, R"(root ::= "a" b | "x"
b ::= ("b" | "c")+ "d"? # a comment
)",
      {{"abd", true}, {"abcbc", true}, {"x", true}, {"a", false}, {"abdd", false}, {"", false}});
  expect_cases(
      Kind::gbnf, "root ::= [a-c]{2,3} [0-9]{2} \"!\"{1,}",
      {{"ab12!", true}, {"abc12!!!", true}, {"a12!", false}, {"abcd12!", false}, {"ab1!", false}});
  expect_cases(Kind::gbnf, "root ::= \"x\"{3}", {{"xxx", true}, {"xx", false}, {"xxxx", false}});
  expect_cases(Kind::gbnf, "root ::= \"x\"{2,}", {{"xx", true}, {"xxxxx", true}, {"x", false}});
  expect_cases(Kind::gbnf, "root ::= \"x\"{0,2}", {{"", true}, {"xx", true}, {"xxx", false}});
  // Newlines inside groups and after | continue a rule.
  expect_cases(Kind::gbnf, "root ::= (\n  \"a\"\n  | \"b\"\n) |\n \"c\"\n",
               {{"a", true}, {"b", true}, {"c", true}, {"d", false}});
}

TEST(GrammarGbnf, ClassesEscapesAndUnicode) {
  expect_cases(Kind::gbnf, R"(root ::= [^a-z\n] "\x41\u00e9\U0001F600" "\t\"\\" [\-\]])",
               {{"Z"
                 "A\xC3\xA9\xF0\x9F\x98\x80"
                 "\t\"\\"
                 "-",
                 true},
                {"\xE6\x97\xA5"
                 "A\xC3\xA9\xF0\x9F\x98\x80"
                 "\t\"\\"
                 "]",
                 true},
                {"q"
                 "A\xC3\xA9\xF0\x9F\x98\x80"
                 "\t\"\\"
                 "-",
                 false},
                {"\n"
                 "A\xC3\xA9\xF0\x9F\x98\x80"
                 "\t\"\\"
                 "-",
                 false}});
  // `.` is any one code point, as its UTF-8 bytes (never a stray continuation byte).
  expect_cases(Kind::gbnf, "root ::= . .",
               {{"ab", true},
                {"\xC3\xA9"
                 "b",
                 true},
                {"\xC3\xA9", false},
                {"\xA9"
                 "b",
                 false}});
  expect_cases(Kind::gbnf, "root ::= [\xE4\xB8\x80-\xE9\xBF\xBF]+",  // CJK unified ideographs
               {{"\xE6\x97\xA5\xE6\x9C\xAC", true}, {"a", false}});
}

TEST(GrammarGbnf, RecursionAndItsLimits) {
  // Right and middle recursion (balanced brackets).
  expect_cases(Kind::gbnf, "root ::= \"(\" root \")\" | \"\"",
               {{"", true}, {"()", true}, {"((()))", true}, {"(()", false}, {")(", false}});
  // Left recursion is refused, naming the rule; a tail-position cycle is fine.
  expect_error(Kind::gbnf, "root ::= root \"a\" | \"b\"", "left recursion: rule 'root'");
  expect_error(Kind::gbnf, "root ::= x \"a\"\nx ::= y | \"b\"\ny ::= \"\"? x \"c\"",
               "left recursion");
  expect_cases(Kind::gbnf, "root ::= \"a\" | root", {{"a", true}, {"aa", false}});
  expect_cases(Kind::gbnf, "root ::= (\"a\"?)*", {{"", true}, {"aaa", true}, {"b", false}});
}

TEST(GrammarGbnf, Errors) {
  expect_error(Kind::gbnf, "root ::= foo", "rule 'foo' is used but never defined");
  expect_error(Kind::gbnf, "a ::= \"x\"", "no 'root' rule");
  expect_error(Kind::gbnf, "root ::= \"a\"\nroot ::= \"b\"", "defined twice");
  expect_error(Kind::gbnf, "root ::= \"a", "unterminated string literal at line 1");
  expect_error(Kind::gbnf, "root ::= (\"a\"", "expected ')'");
  expect_error(Kind::gbnf, "root ::= <think>", "token references");
  expect_error(Kind::gbnf, "root ::= \"\\q\"", "unknown escape \\q");
  expect_error(Kind::gbnf, "root ::= [z-a]", "range out of order");
  expect_error(Kind::gbnf, "root ::= \"a\"\n| \"b\"", "expected a rule name at line 2");
}

TEST(GrammarRegex, Syntax) {
  expect_cases(Kind::regex, "a(b|c)*d", {{"ad", true}, {"abcbd", true}, {"abx", false}});
  expect_cases(Kind::regex, "^\\d{3}-\\d{2,4}$",
               {{"123-45", true}, {"123-4567", true}, {"12-45", false}, {"123-45678", false}});
  expect_cases(Kind::regex, "[A-Z][a-z]+(?: [A-Z][a-z]+)?",
               {{"Ada", true}, {"Ada Lovelace", true}, {"ada", false}, {"Ada ", false}});
  expect_cases(Kind::regex, "(?P<year>\\d{4})-(?<m>\\d\\d)",
               {{"2024-05", true}, {"2024-5", false}});
  expect_cases(Kind::regex, "\\w+\\s\\W", {{"ab_9 !", true}, {"ab\t-", true}, {"ab x", false}});
  expect_cases(Kind::regex, "\\D\\S", {{"ab", true}, {"1b", false}, {"a ", false}});
  expect_cases(Kind::regex, "[^abc]x",
               {{"dx", true}, {"\xC3\xA9x", true}, {"ax", false}, {"\nx", true}});
  expect_cases(Kind::regex, ".",
               {{"a", true}, {"\xE6\x97\xA5", true}, {"\n", false}, {"ab", false}});
  expect_cases(Kind::regex, "a{2}b{1,}c{0,1}d*?",
               {{"aab", true}, {"aabbbcddd", true}, {"ab", false}});
  expect_cases(Kind::regex, "\\.\\*\\x41\\u00e9[\\]\\-]",
               {{".*A\xC3\xA9]", true}, {".*A\xC3\xA9-", true}, {"a*A\xC3\xA9-", false}});
  expect_cases(Kind::regex, "x{,3}", {{"x{,3}", true}, {"xxx", false}});  // Python: a literal brace
  expect_cases(Kind::regex, "(a|a)*b", {{"aaaab", true}, {"b", true}, {"aaa", false}});
}

TEST(GrammarRegex, RefusedFeaturesAreNamed) {
  expect_error(Kind::regex, "(a)\\1", "backreferences (\\1)");
  expect_error(Kind::regex, "(?P<x>a)(?P=x)", "backreferences (?P=name)");
  expect_error(Kind::regex, "a(?=b)", "lookahead");
  expect_error(Kind::regex, "a(?!b)", "lookahead");
  expect_error(Kind::regex, "(?<=a)b", "lookbehind");
  expect_error(Kind::regex, "(?<!a)b", "lookbehind");
  expect_error(Kind::regex, "(?>ab)", "atomic groups");
  expect_error(Kind::regex, "(?i)ab", "inline flags");
  expect_error(Kind::regex, "a\\bb", "word boundaries");
  expect_error(Kind::regex, "a^b", "the anchor ^ is supported only at the pattern's ends");
  expect_error(Kind::regex, "a$b", "the anchor $");
  expect_error(Kind::regex, "a++", "possessive");
  expect_error(Kind::regex, "\\p{L}", "Unicode property");
  expect_error(Kind::regex, "(ab", "missing ')'");
  expect_error(Kind::regex, "ab)", "unbalanced ')'");
  expect_error(Kind::regex, "*a", "nothing to repeat");
  expect_error(Kind::regex, "[[:alpha:]]", "POSIX classes");
}

TEST(GrammarChoice, ExactStrings) {
  expect_cases(Kind::choice, R"(["yes", "no", "maybe so", "日本"])",
               {{"yes", true},
                {"no", true},
                {"maybe so", true},
                {"\xE6\x97\xA5\xE6\x9C\xAC", true},
                {"ye", false},
                {"yesno", false},
                {"", false}});
  expect_error(Kind::choice, "[]", "non-empty JSON array");
  expect_error(Kind::choice, "[1]", "element 0 is not a string");
  expect_error(Kind::choice, "not json", "choice: not JSON");
}

TEST(GrammarCompileCache, SameTextSameGrammarObject) {
  const std::string text = R"(root ::= "cached" [0-9]+)";
  const auto before = compile_cache_stats();
  auto a = compile_cached(Kind::gbnf, text);
  auto b = compile_cached(Kind::gbnf, text);
  auto c = compile_cached(Kind::regex, text);  // same text, other kind: another entry
  const auto after = compile_cache_stats();
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(a.get(), c.get());
  EXPECT_EQ(after.hits - before.hits, 1u);
  EXPECT_EQ(after.misses - before.misses, 2u);
  EXPECT_TRUE(full_match(a, "cached42"));
  // Each scope (a tenant) has entries of its own: the same text is a miss in another scope.
  const auto scoped_before = compile_cache_stats();
  auto d = compile_cached(Kind::gbnf, text, "tenant-b");
  auto e = compile_cached(Kind::gbnf, text, "tenant-b");
  const auto scoped_after = compile_cache_stats();
  EXPECT_NE(d.get(), a.get()) << "another scope's entry was a hit";
  EXPECT_EQ(d.get(), e.get());
  EXPECT_EQ(scoped_after.misses - scoped_before.misses, 1u);
  EXPECT_EQ(scoped_after.hits - scoped_before.hits, 1u);
  // Errors are not cached: each call throws again.
  for (int i = 0; i < 2; ++i) EXPECT_THROW(compile_cached(Kind::gbnf, "root ::= missing"), Error);
  // Thread-safe: many threads, one grammar object per text.
  std::vector<std::thread> threads;
  std::vector<const Grammar*> seen(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] { seen[t] = compile_cached(Kind::regex, "[a-z]{1,8}").get(); });
  }
  for (auto& th : threads) th.join();
  for (int t = 1; t < 8; ++t) EXPECT_EQ(seen[t], seen[0]);
}

// A schema of a few hundred bytes compiles to megabytes (a counted string is a chain of rules):
// the cache keeps what its byte budget allows, and a grammar larger than the whole budget is
// returned but not kept.
TEST(GrammarCompileCache, ByteBudgetBoundsTheCache) {
  const size_t budget_before = compile_cache_budget();
  auto schema = [](int i, int n) {
    return R"({"type":"object","properties":{"a":{"type":"string","maxLength":)" +
           std::to_string(n) + R"(},"b":{"const":)" + std::to_string(i) + "}}}";
  };
  const size_t one = compile(Kind::json_schema, schema(0, 2000))->size_bytes();
  ASSERT_GT(one, 100000u) << "the test needs grammars much larger than their text";
  compile_cache_budget_set(3 * one);
  const auto before = compile_cache_stats();
  std::vector<std::shared_ptr<const Grammar>> held;
  for (int i = 1; i <= 8; ++i) {
    held.push_back(compile_cached(Kind::json_schema, schema(i, 2000)));
    EXPECT_LE(compile_cache_stats().bytes, 3 * one) << i;
  }
  const auto after = compile_cache_stats();
  EXPECT_GE(after.evictions - before.evictions, 5u);
  EXPECT_LE(after.entries, 3u);
  EXPECT_EQ(after.running, 0u);
  // The newest are kept: a hit.
  EXPECT_EQ(compile_cached(Kind::json_schema, schema(8, 2000)).get(), held.back().get());
  // Larger than the budget: compiled, returned, not kept.
  const auto huge = compile_cached(Kind::json_schema, schema(9, 9000));
  EXPECT_GT(huge->size_bytes(), 3 * one);
  EXPECT_TRUE(full_match(huge, R"({"a":"x","b":9})"));
  EXPECT_EQ(compile_cache_stats().entries, after.entries);
  EXPECT_NE(compile_cached(Kind::json_schema, schema(9, 9000)).get(), huge.get());
  // A smaller budget evicts at once.
  compile_cache_budget_set(one);
  EXPECT_LE(compile_cache_stats().bytes, one);
  compile_cache_budget_set(budget_before);
}

// Tool calls (tool_calls.h): the Hermes JSON form and the XML form, the allowed tools only,
// the arguments' schema enforced (no extra arguments unless the schema allows them; XML string
// and enum values raw, as the output parser reads them), one call or several.
TEST(GrammarToolCalls, HermesCallsFollowTheirSchemas) {
  const std::string spec = R"({"syntax":"hermes","parallel":true,"tools":[
    {"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},
      "days":{"type":"integer","minimum":1,"maximum":7}},"required":["city"]}},
    {"name":"now"}]})";
  const std::string w = "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":";
  expect_cases(
      Kind::tool_calls, spec,
      {{w + "{\"city\":\"Paris\"}}\n</tool_call>", true},
       {w + "{\"city\":\"Paris\",\"days\":3}}\n</tool_call>", true},
       {w + "{\"city\":\"Paris\",\"days\":9}}\n</tool_call>", false},
       {w + "{\"days\":3}}\n</tool_call>", false},
       {w + "{\"city\":\"Paris\",\"extra\":1}}\n</tool_call>", false},
       {"<tool_call>\n{\"name\":\"now\",\"arguments\":{\"any\":[1]}}\n</tool_call>", true},
       {"<tool_call>\n{\"name\":\"other\",\"arguments\":{}}\n</tool_call>", false},
       {w + "{\"city\":\"A\"}}\n</tool_call>\n" + w + "{\"city\":\"B\"}}\n</tool_call>", true},
       {"Sure! " + w + "{\"city\":\"A\"}}\n</tool_call>", false},
       {"", false}});
  const std::string single = R"({"syntax":"hermes","parallel":false,"tools":[{"name":"now"}]})";
  const std::string call = "<tool_call>\n{\"name\":\"now\",\"arguments\":{}}\n</tool_call>";
  expect_cases(Kind::tool_calls, single, {{call, true}, {call + "\n" + call, false}});
}

// tool_choice auto with strict tools (text_first): text, a call after it, or text alone; the
// text never holds the opener, and a call once opened follows its schema.
TEST(GrammarToolCalls, TextFirstLeavesTheChoiceAndCallsStillParse) {
  const std::string spec = R"({"syntax":"hermes","text_first":true,"tools":[
    {"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},
      "required":["city"]}}]})";
  const std::string w = "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":";
  expect_cases(Kind::tool_calls, spec,
               {{"", true},
                {"It is sunny. <tool is not a call>", true},
                {"Let me look.\n\n" + w + "{\"city\":\"Paris\"}}\n</tool_call>", true},
                {w + "{\"city\":\"Paris\"}}\n</tool_call>", true},
                {"Let me look. " + w + "{\"town\":\"Paris\"}}\n</tool_call>", false},
                {"Let me look. <tool_call>\n{\"name\":\"other\"", false},
                {w + "{\"city\":\"Paris\"}}\n</tool_call> and more", false}});
  // Without text_first the same text is not an output.
  expect_cases(Kind::tool_calls, R"({"syntax":"hermes","tools":[{"name":"get_weather"}]})",
               {{"It is sunny.", false}});
}

TEST(GrammarToolCalls, XmlCallsTakeRawStringsAndJsonValues) {
  const std::string spec = R"({"syntax":"qwen3_xml","parallel":false,"tools":[
    {"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},
      "days":{"type":"integer"},"units":{"enum":["c","f"]}},"required":["city","days"]}}]})";
  const std::string open = "<tool_call>\n<function=get_weather>\n";
  const std::string city = "<parameter=city>\nSão Paulo <downtown>\n</parameter>\n";
  const std::string days = "<parameter=days>\n3\n</parameter>\n";
  const std::string close = "</function>\n</tool_call>";
  expect_cases(Kind::tool_calls, spec,
               {{open + city + days + close, true},
                {open + city + days + "<parameter=units>\nf\n</parameter>\n" + close, true},
                {open + city + days + "<parameter=units>\n\"f\"\n</parameter>\n" + close, false},
                {open + city + "<parameter=days>\nthree\n</parameter>\n" + close, false},
                {open + days + close, false},
                {open + "<parameter=city>\na</parameter>b\n</parameter>\n" + days + close, false},
                {open + city + days + "<parameter=units>\nk\n</parameter>\n" + close, false}});
  // A schema without plain properties: any names, raw values.
  expect_cases(Kind::tool_calls, R"({"syntax":"qwen3_xml","tools":[{"name":"f"}]})",
               {{"<tool_call>\n<function=f>\n<parameter=x>\n1\n</parameter>\n</function>\n"
                 "</tool_call>",
                 true},
                {"<tool_call>\n<function=f>\n</function>\n</tool_call>", true}});
}

TEST(GrammarToolCalls, ErrorsNameTheTool) {
  auto message = [](const std::string& spec) {
    try {
      compile(Kind::tool_calls, spec);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("compiled");
  };
  EXPECT_NE(message(R"({"syntax":"hermes","tools":[{"name":"f","parameters":{"type":"object",)"
                    R"("properties":{"x":{"type":"integer","multipleOf":2}}}}]})")
                .find("function 'f'"),
            std::string::npos);
  EXPECT_NE(message(R"({"syntax":"yaml","tools":[{"name":"f"}]})").find("syntax"),
            std::string::npos);
  EXPECT_NE(message(R"({"syntax":"hermes","tools":[]})").find("non-empty"), std::string::npos);
}

}  // namespace
}  // namespace invar::grammar
