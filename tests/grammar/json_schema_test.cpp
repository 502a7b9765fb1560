// JSON Schema: the corpus of tests/data/grammar/schemas.json (every keyword the compiler takes),
// sampled by seeded random walks of the matcher and validated by Python's jsonschema; exact
// checks of the number ranges and dates; and every refused keyword named with its path.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "grammar/error.h"
#include "grammar_test_util.h"

namespace invar::grammar {
namespace {

using test::full_match;

nlohmann::ordered_json load_corpus() {
  std::ifstream in(std::string(INVAR_TEST_DATA_DIR) + "/grammar/schemas.json");
  return nlohmann::ordered_json::parse(in);
}

std::string run_python(const std::string& script, const std::string& arg, int& rc) {
  const std::string cmd = std::string(INVAR_PYTHON3) + " " + script + " " + arg + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  rc = pclose(p);
  return out;
}

TEST(GrammarJsonSchema, CorpusSamplesValidateInPythonJsonschema) {
  const auto corpus = load_corpus();
  ASSERT_GE(corpus.size(), 100u);
  const auto sv = test::synthetic_vocab();
  const auto qwen = test::qwen3_vocab();
  const auto dir =
      std::filesystem::temp_directory_path() / ("invar-grammar-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto file = dir / "instances.jsonl";
  std::ofstream out(file);
  size_t docs = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const auto& entry = corpus[i];
    const std::string name = entry["name"];
    std::shared_ptr<const Grammar> g;
    try {
      g = compile(Kind::json_schema, entry["schema"].dump());
    } catch (const Error& e) {
      ADD_FAILURE() << name << ": " << e.what();
      continue;
    }
    // Four walks over the synthetic vocabulary, one over Qwen3's, each seeded by (schema, walk).
    for (int w = 0; w < 5; ++w) {
      const bool real = w == 4;
      const auto& v = real ? qwen : sv.vocab;
      std::mt19937_64 rng(1000 * i + w);
      Matcher m(g, v);
      bool ok;
      const std::string text = test::random_walk(m, *v, rng, real ? 80 : 8 + 60 * w, 20000, ok);
      ASSERT_TRUE(ok) << name << " walk " << w
                      << " did not reach an accepting state: " << text.substr(0, 300);
      EXPECT_TRUE(full_match(g, text)) << name << ": " << text;
      if (name == "invoice" || name == "ref-recursive-tree" || name == "enum-non-ascii") {
        std::printf("sample %s walk %d: %s\n", name.c_str(), w, text.substr(0, 400).c_str());
      }
      nlohmann::json rec = {{"name", name},
                            {"schema", nlohmann::json::parse(entry["schema"].dump())},
                            {"text", text}};
      out << rec.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      ++docs;
    }
  }
  out.close();
  int rc = 0;
  const std::string report = run_python(
      std::string(INVAR_SOURCE_DIR) + "/tests/grammar/validate_instances.py", file.string(), rc);
  std::printf("%s", report.c_str());
  EXPECT_EQ(rc, 0) << report;
  EXPECT_NE(report.find("validated " + std::to_string(docs) + " documents"), std::string::npos)
      << report;
  std::filesystem::remove_all(dir);
}

TEST(GrammarJsonSchema, IntegerRangesAreExact) {
  const std::vector<std::pair<int64_t, int64_t>> ranges = {
      {0, 9}, {1, 12},  {-5, 5},     {10, 99},  {100, 1000}, {-1000, -10},
      {7, 7}, {-99, 0}, {123, 4567}, {19, 201}, {-301, -299}};
  for (auto [lo, hi] : ranges) {
    auto g = compile(Kind::json_schema,
                     nlohmann::json{{"type", "integer"}, {"minimum", lo}, {"maximum", hi}}.dump());
    for (int64_t x = lo - 120; x <= hi + 120; ++x) {
      ASSERT_EQ(full_match(g, std::to_string(x)), x >= lo && x <= hi)
          << lo << ".." << hi << " on " << x;
    }
    EXPECT_FALSE(full_match(g, "-0"));
    EXPECT_FALSE(full_match(g, "0" + std::to_string(std::max<int64_t>(lo, 1))));  // leading zero
  }
  auto open_lo = compile(Kind::json_schema, R"({"type":"integer","exclusiveMinimum":41})");
  EXPECT_FALSE(full_match(open_lo, "41"));
  EXPECT_TRUE(full_match(open_lo, "42"));
  EXPECT_TRUE(full_match(open_lo, "123456789012"));
  EXPECT_FALSE(full_match(open_lo, "-50"));
  auto open_hi = compile(Kind::json_schema, R"({"type":"integer","maximum":-3})");
  EXPECT_TRUE(full_match(open_hi, "-3"));
  EXPECT_TRUE(full_match(open_hi, "-99999999"));
  EXPECT_FALSE(full_match(open_hi, "-2"));
  EXPECT_FALSE(full_match(open_hi, "0"));
}

TEST(GrammarJsonSchema, NumberBoundsAreExact) {
  auto g = compile(Kind::json_schema, R"({"type":"number","minimum":-2,"exclusiveMaximum":3})");
  for (const char* yes : {"-2", "-2.0", "-1.999", "0", "-0.5", "2.999", "2", "0.0"})
    EXPECT_TRUE(full_match(g, yes)) << yes;
  for (const char* no : {"-2.001", "3", "3.0", "3.5", "-3", "-0", "1e2", "01"})
    EXPECT_FALSE(full_match(g, no)) << no;
  auto pos = compile(Kind::json_schema, R"({"type":"number","exclusiveMinimum":0})");
  for (const char* yes : {"0.001", "1", "12.5"}) EXPECT_TRUE(full_match(pos, yes)) << yes;
  for (const char* no : {"0", "0.000", "-1", "-0.5"}) EXPECT_FALSE(full_match(pos, no)) << no;
}

bool leap(int y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

TEST(GrammarJsonSchema, DatesAreExact) {
  auto g = compile(Kind::json_schema, R"({"type":"string","format":"date"})");
  const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  char buf[32];
  for (int y : {0, 1, 4, 100, 400, 1900, 2000, 2023, 2024, 2100, 9996}) {
    for (int m = 0; m <= 13; ++m) {
      for (int d = 0; d <= 32; ++d) {
        const bool valid = y >= 1 && m >= 1 && m <= 12 && d >= 1 &&
                           d <= (m == 2 && leap(y) ? 29 : mdays[std::max(0, std::min(m, 12) - 1)]);
        std::snprintf(buf, sizeof(buf), "\"%04d-%02d-%02d\"", y, m, d);
        ASSERT_EQ(full_match(g, buf), valid) << buf;
      }
    }
  }
}

TEST(GrammarJsonSchema, CompactFormAndPropertyOrder) {
  auto g = compile(
      Kind::json_schema,
      R"({"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"array","items":{"type":"integer"}}},
    "required":["b"],"additionalProperties":false})");
  EXPECT_TRUE(full_match(g, R"({"b":1,"a":[1,2]})"));
  EXPECT_TRUE(full_match(g, R"({"b":1})"));
  EXPECT_FALSE(full_match(g, R"({"a":[1,2],"b":1})"));  // schema order
  EXPECT_FALSE(full_match(g, R"({"b": 1})"));           // no whitespace
  EXPECT_FALSE(full_match(g, R"({"b":1,"c":2})"));      // additionalProperties false
  EXPECT_FALSE(full_match(g, R"({})"));                 // required
  // Additional keys (default: any) never repeat a listed name, however it is spelled.
  auto open =
      compile(Kind::json_schema, R"({"type":"object","properties":{"id":{"type":"integer"}}})");
  EXPECT_TRUE(full_match(open, R"({"id":1,"x":"y","idx":[true]})"));
  EXPECT_TRUE(full_match(open, R"({"other":null})"));
  EXPECT_FALSE(full_match(open, R"({"id":1,"id":2})"));
  EXPECT_FALSE(full_match(open, R"({"\u0069d":"x"})"));  // non-canonical escapes are not produced
  // Strings are canonical: escapes only where JSON needs them.
  auto s = compile(Kind::json_schema, R"({"type":"string"})");
  EXPECT_TRUE(full_match(s, "\"a\\\"b\\\\c\\n\\u0001\xC3\xA9\""));
  EXPECT_FALSE(full_match(s, "\"\\u0041\""));
  EXPECT_FALSE(full_match(s, "\"\\/\""));
  EXPECT_FALSE(full_match(s, "\"\x01\""));
  // json_object: any object, compact.
  auto obj = compile(Kind::json_object, "");
  EXPECT_TRUE(full_match(obj, R"({"a":[1,{"b":null}],"c":-1.5e3})"));
  EXPECT_FALSE(full_match(obj, "[1]"));
  EXPECT_FALSE(full_match(obj, "{\"a\" :1}"));
}

TEST(GrammarJsonSchema, PatternsUseSearchSemanticsUnlessAnchored) {
  auto unanchored = compile(Kind::json_schema, R"({"type":"string","pattern":"ab"})");
  EXPECT_TRUE(full_match(unanchored, "\"xxabyy\""));
  EXPECT_FALSE(full_match(unanchored, "\"axb\""));
  auto anchored = compile(Kind::json_schema, R"({"type":"string","pattern":"^ab$"})");
  EXPECT_TRUE(full_match(anchored, "\"ab\""));
  EXPECT_FALSE(full_match(anchored, "\"xab\""));
  auto start = compile(Kind::json_schema, R"({"type":"string","pattern":"^ab"})");
  EXPECT_TRUE(full_match(start, "\"abzz\""));
  EXPECT_FALSE(full_match(start, "\"zab\""));
  // Characters JSON must escape appear escaped inside the string.
  auto quote = compile(Kind::json_schema, R"({"type":"string","pattern":"^a\"b\\\\$"})");
  EXPECT_TRUE(full_match(quote, "\"a\\\"b\\\\\""));
}

void expect_refused(const std::string& schema, const std::string& needle) {
  try {
    compile(Kind::json_schema, schema);
    ADD_FAILURE() << schema << " compiled; expected an error naming '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(GrammarJsonSchema, UnsupportedKeywordsAreNamedWithTheirPath) {
  for (const char* k : {"multipleOf",
                        "patternProperties",
                        "propertyNames",
                        "minProperties",
                        "maxProperties",
                        "dependentRequired",
                        "dependentSchemas",
                        "uniqueItems",
                        "contains",
                        "minContains",
                        "maxContains",
                        "if",
                        "then",
                        "else",
                        "not",
                        "unevaluatedProperties",
                        "unevaluatedItems",
                        "contentEncoding",
                        "$dynamicRef",
                        "$anchor",
                        "additionalItems",
                        "discriminator"}) {
    const std::string schema =
        std::string(R"({"type":"object","properties":{"x":{"type":"integer",")") + k + R"(":1}}})";
    expect_refused(schema,
                   std::string("keyword '") + k + "' is not supported at /properties/x/" + k);
  }
  expect_refused(R"j({"type":"string","format":"hostname"})j",
                 "format 'hostname' is not supported");
  expect_refused(R"j({"type":"number","minimum":0.5})j", "not an integer");
  expect_refused(R"j({"type":"string","pattern":"a(?=b)"})j", "lookahead");
  expect_refused(R"j({"type":"string","pattern":"(a)\\1"})j", "/pattern: backreferences");
  expect_refused(R"j({"type":"string","pattern":"^a","maxLength":3})j",
                 "pattern together with minLength/maxLength");
  expect_refused(R"j({"$ref":"other.json#/x"})j", "not a local reference");
  expect_refused(R"j({"$ref":"#/$defs/missing"})j", "points to nothing");
  expect_refused(R"j({"$ref":"#/$defs/a","type":"object","$defs":{"a":{}}})j",
                 "keyword 'type' beside $ref");
  expect_refused(R"j({"oneOf":[{"type":"integer"},{"type":"number"}]})j",
                 "oneOf branches may overlap");
  expect_refused(R"j({"allOf":[{"type":"string"},{"maxLength":3}]})j",
                 "allOf of several schemas merges type object");
  expect_refused(
      R"j({"allOf":[{"properties":{"a":{"type":"integer"}}},{"properties":{"a":{"type":"string"}}}]})j",
      "different schemas");
  expect_refused(R"j({"allOf":[{"additionalProperties":false},{"properties":{"a":{}}}]})j",
                 "'additionalProperties' is not merged");
  expect_refused(R"j({"type":"object","properties":{"a":false},"required":["a"]})j",
                 "required but its schema is false");
  expect_refused(R"j({"type":"array","items":[{"type":"integer"}]})j", "use prefixItems");
  expect_refused(R"j({"type":"integer","minimum":5,"maximum":4})j", "no integer satisfies");
  expect_refused(R"j({"type":"string","minLength":3,"maxLength":2})j",
                 "maxLength is below minLength");
  expect_refused(R"j({"type":"array","minItems":3,"maxItems":2})j", "no array satisfies");
  expect_refused(R"j({"type":"widget"})j", "unknown type 'widget'");
  expect_refused(R"j({"enum":[1,2],"minimum":0})j", "keyword 'minimum' beside enum/const");
  expect_refused(R"j({"type":"string","enum":[1,2]})j",
                 "no enum/const value has the schema's type");
  expect_refused(R"j(false)j", "the schema false matches nothing");
  expect_refused(
      R"j({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})j",
      "derives no string");
  expect_refused(R"j({"type":"integer","exclusiveMinimum":true})j",
                 "exclusiveMinimum must be a number");
  expect_refused("{not json", "json_schema: not JSON");
}

}  // namespace
}  // namespace invar::grammar
