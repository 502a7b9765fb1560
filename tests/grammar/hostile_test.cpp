// Hostile inputs end in the limit error (or, where the construction is linear, in a small
// automaton), never in exponential time or memory. Times are printed, never asserted.
#include <gtest/gtest.h>

#include <chrono>

#include "grammar/error.h"
#include "grammar_test_util.h"

namespace invar::grammar {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void expect_limit(Kind kind, const std::string& text, const std::string& needle, const char* what) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    compile(kind, text);
    ADD_FAILURE() << what << ": compiled; expected LimitError naming " << needle;
  } catch (const LimitError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  } catch (const Error& e) {
    ADD_FAILURE() << what << ": Error but not LimitError: " << e.what();
  }
  std::printf("hostile %-34s -> limit error in %8.2f ms (%zu bytes of input)\n", what, ms_since(t0),
              text.size());
}

std::string repeat(const std::string& s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

TEST(GrammarHostile, BlowupsEndInTheLimitError) {
  expect_limit(Kind::regex, "(a{1000}){1000}", "max_repeat_states", "regex (a{1000}){1000}");
  expect_limit(Kind::regex, "a{100000}", "max_repeat", "regex a{100000}");
  expect_limit(Kind::gbnf, "root ::= ((\"a\"{100}){100}){100}", "max_repeat_states",
               "gbnf nested {100}");
  expect_limit(Kind::regex, repeat("(", 5000) + "a" + repeat(")", 5000), "max_nesting",
               "regex 5000 nested groups");
  expect_limit(Kind::gbnf, "root ::= " + repeat("(", 5000) + "\"a\"" + repeat(")", 5000),
               "max_nesting", "gbnf 5000 nested groups");
  expect_limit(Kind::json_schema, repeat("{\"items\":", 5000) + "{}" + repeat("}", 5000),
               "max_nesting", "schema nested 5000 deep");
  expect_limit(Kind::json_schema, R"({"type":"string","maxLength":1000000})", "max_repeat",
               "schema maxLength 1e6");
  expect_limit(Kind::json_schema, R"({"type":"array","minItems":50000})", "max_repeat",
               "schema minItems 5e4");
  // A 1 MB schema: refused by size before it is parsed.
  std::string big = "{\"enum\":[";
  while (big.size() < (1u << 20)) big += "\"" + std::to_string(big.size()) + "\",";
  big += "\"x\"]}";
  expect_limit(Kind::json_schema, big, "max_input_bytes", "schema of 1 MB");
  // A grammar too large after lowering: many rules each with a 10000-step chain.
  std::string many = "root ::= a0\n";
  for (int i = 0; i < 200; ++i)
    many += "a" + std::to_string(i) + " ::= [a-z]{0,10000} a" + std::to_string(i + 1) + "\n";
  many += "a200 ::= \"x\"\n";
  expect_limit(Kind::gbnf, many, "max_grammar_elements", "gbnf 200 x {0,10000}");
}

// Issue 51: ~30 bytes of regex that compiled and then failed in the middle of generation
// (16384 parallel parses after ~55 letters). Its expansion is known at compile time: 300
// repetitions of 300 states, refused with the limit's name and the count, in every front end
// that has counted repetitions (JSON Schema reaches them through `pattern`).
TEST(GrammarHostile, NestedCountedRepetitionsAreRefusedByTheirStates) {
  expect_limit(Kind::regex, "hello ([a-z]{0,300}){0,300}", "(90000 states), more than 16384",
               "regex ([a-z]{0,300}){0,300}");
  expect_limit(Kind::gbnf, "root ::= \"hello \" ([a-z]{0,300}){0,300}", "max_repeat_states",
               "gbnf ([a-z]{0,300}){0,300}");
  expect_limit(Kind::json_schema, R"({"type":"string","pattern":"^([a-z]{0,300}){0,300}$"})",
               "max_repeat_states", "schema pattern {0,300}x2");
  // What a repetition repeats is counted whole: an alternation or a sequence adds its parts.
  expect_limit(Kind::regex, "(ab|[a-z]{0,100}){0,200}", "(20400 states)", "regex alt in {200}");
  // The bound is exact: 128 x 128 states compile, 128 x 129 do not.
  EXPECT_NO_THROW(compile(Kind::regex, "([a-z]{0,128}){0,128}"));
  expect_limit(Kind::regex, "([a-z]{0,128}){0,129}", "max_repeat_states", "regex 128 x 129");
  // Flat repetitions keep their own bound (max_repeat), and loops copy nothing.
  EXPECT_NO_THROW(compile(Kind::regex, ".{0,10000}[a-z]{0,10000}(ab|cd|ef)*"));
}

// The two bounds agree: live parses are positions of the expansion, so a nest of repetitions
// within max_repeat_states stays within max_stacks_per_state at run time, and one just past it
// (compiled with the compile-time check raised) passes the run-time limit on the same input.
// Both bounds at 1024 rather than 16384 keep the walk to milliseconds: the relation is what is
// tested, and the defaults are equal (asserted).
TEST(GrammarHostile, TheCompileBoundKeepsRepetitionsUnderTheRunTimeBound) {
  EXPECT_EQ(static_cast<size_t>(Limits{}.max_repeat_states), Limits{}.max_stacks_per_state);
  const auto sv = test::synthetic_vocab();
  const std::string letters(100, 'q');
  Limits lim;
  lim.max_repeat_states = 1024;
  lim.max_stacks_per_state = 1024;
  Matcher within(compile(Kind::regex, "([a-z]{0,32}){0,32}", lim), sv.vocab, lim);
  EXPECT_TRUE(within.accept_bytes(letters));
  EXPECT_THROW(compile(Kind::regex, "([a-z]{0,36}){0,36}", lim), LimitError);
  lim.max_repeat_states = int64_t{1} << 20;
  Matcher past(compile(Kind::regex, "([a-z]{0,36}){0,36}", lim), sv.vocab, lim);
  try {
    past.accept_bytes(letters);
    ADD_FAILURE() << "1296 states ran without the run-time limit";
  } catch (const LimitError& e) {
    EXPECT_NE(std::string(e.what()).find("max_stacks_per_state"), std::string::npos) << e.what();
  }
}

// Catastrophic-backtracking regexes are linear here: parallel parses are deduplicated as
// interned stacks, so the automaton stays small however long the input.
TEST(GrammarHostile, ExponentialRegexesStayLinear) {
  const auto sv = test::synthetic_vocab();
  for (const char* re :
       {"(a|a)*b", "(a*)*b", "(a|aa)+c", "((a+)+)+b", "(a|ab|abc|abcd)*x", "(.*a){12}"}) {
    auto g = compile(Kind::regex, re);
    Matcher m(g, sv.vocab);
    const auto t0 = std::chrono::steady_clock::now();
    const std::string input(20000, 'a');
    ASSERT_TRUE(m.accept_bytes(input)) << re;
    EXPECT_LT(m.n_cached_states(), 100u) << re;
    const auto mask = m.mask();
    std::printf("hostile regex %-20s 20000 bytes + a mask in %7.2f ms, %zu states, %zu frames\n",
                re, ms_since(t0), m.n_cached_states(), m.n_cached_frames());
  }
}

// An ambiguous grammar whose parses differ in their stacks: a^n has 2^n stacks. The matcher
// stops at max_stacks_per_state with the limit error instead of growing without bound.
TEST(GrammarHostile, AmbiguityEndsInTheLimitError) {
  const auto sv = test::synthetic_vocab();
  auto g = compile(Kind::gbnf, "root ::= s\ns ::= \"a\" s \"b\" | \"a\" s \"c\" | \"\"");
  Matcher m(g, sv.vocab);
  size_t n = 0;
  try {
    for (; n < 64; ++n) ASSERT_TRUE(m.accept_bytes("a"));
    ADD_FAILURE() << "64 bytes accepted without the limit";
  } catch (const LimitError& e) {
    EXPECT_NE(std::string(e.what()).find("max_stacks_per_state"), std::string::npos) << e.what();
  }
  // After a^n: 2^n pending suffixes, each with its top on "a", "a" or the innermost closer,
  // 3 * 2^n stacks: n = 12 is the last under 16384.
  EXPECT_EQ(n, 12u);
  EXPECT_EQ(m.n_steps(), 12u);  // the failed step changed nothing
  // Left recursion is refused at compile time rather than run.
  EXPECT_THROW(compile(Kind::gbnf, "root ::= root \"a\" | \"a\""), Error);
}

// JSON nested deeper than the stack bound is cut off: the mask stops allowing deeper nesting,
// a pure function of the bytes.
TEST(GrammarHostile, RuntimeNestingIsBounded) {
  const auto sv = test::synthetic_vocab();
  Matcher m(compile(Kind::json_object, ""), sv.vocab);
  ASSERT_TRUE(m.accept_bytes("{\"a\":"));
  size_t depth = 1;
  while (depth < 100000 && m.accept_bytes("[")) ++depth;
  EXPECT_LT(depth, 2048u);
  EXPECT_GT(depth, 100u);
  std::printf("hostile json nesting: cut at depth %zu (max_stack_depth %d)\n", depth,
              Limits{}.max_stack_depth);
}

TEST(GrammarHostile, LargeButLegalInputsCompile) {
  std::string choices = "[";
  for (int i = 0; i < 20000; ++i)
    choices += (i ? ",\"" : "\"") + std::string("item-") + std::to_string(i * 7919) + "\"";
  choices += "]";
  auto t0 = std::chrono::steady_clock::now();
  auto g = compile(Kind::choice, choices);
  std::printf("choice of 20000 strings (%zu bytes): compiled in %.1f ms, program %zu bytes\n",
              choices.size(), ms_since(t0), g->size_bytes());
  EXPECT_TRUE(test::full_match(g, "item-7919"));
  EXPECT_FALSE(test::full_match(g, "item-7918"));
  std::string props = "{\"type\":\"object\",\"properties\":{";
  for (int i = 0; i < 3000; ++i)
    props += (i ? ",\"" : "\"") + std::string("field_") + std::to_string(i) +
             "\":{\"type\":\"integer\"}";
  props += "}}";
  t0 = std::chrono::steady_clock::now();
  g = compile(Kind::json_schema, props);
  std::printf(
      "schema of 3000 optional properties (%zu bytes): compiled in %.1f ms, program %zu bytes\n",
      props.size(), ms_since(t0), g->size_bytes());
  EXPECT_TRUE(test::full_match(g, "{\"field_7\":1,\"field_2999\":2}"));
}

}  // namespace
}  // namespace invar::grammar
