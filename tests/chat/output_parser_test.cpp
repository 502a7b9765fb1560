// The reasoning / tool-call output parser on the fixture outputs of
// tests/data/chat-outputs/parser_cases.json: the whole parse equals the expected fields, and the
// same text fed at EVERY split point (two pieces split anywhere, and one byte at a time) gives
// deltas whose concatenation equals the whole parse, with each call's id and name in its first
// delta only.
#include "chat/output_parser.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace output_parser_test {

using invar::chat::OutputDelta;
using invar::chat::OutputParser;
using invar::chat::OutputParserOptions;
using invar::chat::ToolCallSyntax;
using ojson = nlohmann::ordered_json;

ojson load_cases() {
  std::ifstream f(std::string(INVAR_TEST_DATA_DIR) + "/chat-outputs/parser_cases.json");
  std::stringstream ss;
  ss << f.rdbuf();
  return ojson::parse(ss.str());
}

OutputParserOptions options_of(const ojson& c) {
  OutputParserOptions o;
  const std::string syntax = c["syntax"];
  o.tool_calls = syntax == "hermes"      ? ToolCallSyntax::hermes
                 : syntax == "qwen3_xml" ? ToolCallSyntax::qwen3_xml
                                         : ToolCallSyntax::none;
  o.starts_in_reasoning = c["starts_in_reasoning"];
  o.reasoning = c["reasoning"];
  o.tools = c["tools"];
  o.make_id = [](size_t i) { return "call_" + std::to_string(i); };
  return o;
}

// The concatenation of every delta, as a client assembles a stream.
struct Assembled {
  std::string content, reasoning;
  std::vector<ojson> calls;  // {id, name, arguments}
  std::string error;
  void add(const OutputDelta& d) {
    content += d.content;
    reasoning += d.reasoning;
    for (const auto& c : d.tool_calls) {
      if (!c.id.empty()) {
        if (c.index != calls.size()) error += "call index out of order; ";
        calls.push_back({{"id", c.id}, {"name", c.name}, {"arguments", ""}});
      } else if (!c.name.empty()) {
        error += "name sent after the first delta; ";
      }
      if (c.index >= calls.size()) {
        error += "arguments before the call's header; ";
        continue;
      }
      calls[c.index]["arguments"] = calls[c.index]["arguments"].get<std::string>() + c.arguments;
    }
  }
  ojson expected_form() const {
    ojson out = ojson::array();
    for (const auto& c : calls) out.push_back({{"name", c["name"]}, {"arguments", c["arguments"]}});
    return out;
  }
};

Assembled parse_pieces(const ojson& c, const std::vector<std::string>& pieces) {
  OutputParser p(options_of(c));
  Assembled a;
  for (const auto& piece : pieces) a.add(p.feed(piece));
  a.add(p.finish());
  // The parser's own record equals what the deltas assembled.
  if (p.content() != a.content || p.reasoning() != a.reasoning ||
      p.tool_calls().size() != a.calls.size())
    a.error += "parser record differs from its deltas; ";
  return a;
}

TEST(OutputParser, FixturesWholeAndAtEverySplitPoint) {
  const ojson cases = load_cases();
  ASSERT_GE(cases.size(), 15u);
  int splits = 0, with_calls = 0, with_reasoning = 0;
  for (const auto& c : cases) {
    const std::string name = c["name"], text = c["text"];
    const Assembled whole = parse_pieces(c, {text});
    EXPECT_EQ(whole.error, "") << name;
    EXPECT_EQ(whole.content, c["expect"]["content"].get<std::string>()) << name;
    EXPECT_EQ(whole.reasoning, c["expect"]["reasoning"].get<std::string>()) << name;
    EXPECT_EQ(whole.expected_form(), c["expect"]["tool_calls"]) << name;
    with_calls += !whole.calls.empty();
    with_reasoning += !whole.reasoning.empty();

    for (size_t k = 0; k <= text.size(); ++k) {
      const Assembled two = parse_pieces(c, {text.substr(0, k), text.substr(k)});
      ++splits;
      EXPECT_EQ(two.error, "") << name << " split at " << k;
      EXPECT_EQ(two.content, whole.content) << name << " split at " << k;
      EXPECT_EQ(two.reasoning, whole.reasoning) << name << " split at " << k;
      EXPECT_EQ(two.calls, whole.calls) << name << " split at " << k;
      if (two.content != whole.content || two.calls != whole.calls) break;  // one report
    }
    std::vector<std::string> bytes;
    for (char ch : text) bytes.emplace_back(1, ch);
    const Assembled one = parse_pieces(c, bytes);
    EXPECT_EQ(one.error, "") << name;
    EXPECT_EQ(one.content, whole.content) << name << " byte by byte";
    EXPECT_EQ(one.reasoning, whole.reasoning) << name << " byte by byte";
    EXPECT_EQ(one.calls, whole.calls) << name << " byte by byte";
  }
  std::printf(
      "output parser: %zu fixtures, %d two-piece splits, %d with tool calls, %d with "
      "reasoning\n",
      cases.size(), splits, with_calls, with_reasoning);
  EXPECT_GE(with_calls, 6);
  EXPECT_GE(with_reasoning, 6);
}

// An XML call streams: its header as soon as <function=NAME> is complete, then one argument
// piece per parameter, before </tool_call> has arrived.
TEST(OutputParser, XmlCallStreamsBeforeItEnds) {
  OutputParserOptions o;
  o.tool_calls = ToolCallSyntax::qwen3_xml;
  o.make_id = [](size_t) { return std::string("call_x"); };
  OutputParser p(o);
  OutputDelta d = p.feed("<tool_call>\n<function=f>\n");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].id, "call_x");
  EXPECT_EQ(d.tool_calls[0].name, "f");
  EXPECT_EQ(d.tool_calls[0].arguments, "");
  d = p.feed("<parameter=a>\n1\n</parameter>\n");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].id, "");
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"a\":\"1\"");
  d = p.feed("</function>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, "}");
}

TEST(OutputParser, ParameterTypingFollowsTheSchema) {
  const ojson tools = ojson::parse(R"([{"type":"function","function":{"name":"f","parameters":
    {"type":"object","properties":{"i":{"type":"integer"},"n":{"type":"number"},
    "s":{"type":"string"},"o":{"anyOf":[{"type":"object"},{"type":"null"}]}}}}}])");
  using invar::chat::tool_parameter_value;
  EXPECT_EQ(tool_parameter_value(tools, "f", "i", "42"), ojson(42));
  EXPECT_EQ(tool_parameter_value(tools, "f", "i", "4.5"), ojson("4.5"));
  EXPECT_EQ(tool_parameter_value(tools, "f", "n", "4.5"), ojson(4.5));
  EXPECT_EQ(tool_parameter_value(tools, "f", "n", "1e3"), ojson(1000));
  EXPECT_EQ(tool_parameter_value(tools, "f", "n", "nan"), ojson("nan"));
  EXPECT_EQ(tool_parameter_value(tools, "f", "s", "null"), ojson("null"));
  EXPECT_EQ(tool_parameter_value(tools, "f", "o", "None"), ojson(nullptr));
  EXPECT_EQ(tool_parameter_value(tools, "f", "o", "{\"k\": [1]}"), ojson::parse("{\"k\":[1]}"));
  EXPECT_EQ(tool_parameter_value(tools, "f", "o", "{'k': 1}"), ojson("{'k': 1}"));
  EXPECT_EQ(tool_parameter_value(tools, "g", "i", "42"), ojson("42"));  // unknown function
  std::string deep(100000, '[');
  EXPECT_EQ(tool_parameter_value(tools, "f", "o", deep), ojson(deep));  // no stack overflow
}

}  // namespace output_parser_test
