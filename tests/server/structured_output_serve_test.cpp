// Structured output on the real `invar serve` (tiny model, real HTTP): every way clients ask
// for it (OpenAI response_format, vLLM structured_outputs and guided_*, llama-server grammar and
// json_schema) yields output of the asked shape; streamed output is the whole output; bad
// constraints are a 400 naming the field, hostile ones too and promptly; tool_choice
// "required" and a named function always give calls that parse, in both tool-call syntaxes
// (Hermes JSON on the Qwen3 template, XML on the Qwen3.5 one).
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <thread>

#include "serve_process.h"

using namespace invar::server::testing;
// Ordered: a schema's properties reach the server in the order written here.
using json = nlohmann::ordered_json;

namespace structured_output_serve_test {

const char* kCompletions = "/v1/completions";
const char* kChat = "/v1/chat/completions";
const std::string kTemplates = std::string(INVAR_TEST_DATA_DIR) + "/chat-templates/";

ServeProcess& hermes_server() {  // the Qwen3 template: Hermes JSON tool calls
  static ServeProcess s({"--model", kTinyModel, "--threads", "1", "--ctx", "2048",
                         "--chat-template", kTemplates + "Qwen-Qwen3-0.6B.jinja"},
                        "structured_output_serve");
  return s;
}

ServeProcess& xml_server() {  // the Qwen3.5 template: <function=...> tool calls
  static ServeProcess s(
      {"--model", std::string(INVAR_TEST_DATA_DIR) + "/models/qwen35-tiny.gguf", "--threads", "1",
       "--ctx", "2048", "--chat-template", kTemplates + "Qwen3.5-4B.jinja"},
      "structured_output_serve_xml");
  return s;
}

std::pair<int, std::string> post_raw(ServeProcess& s, const std::string& path, const json& body) {
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(120, 0);
  auto r = c.Post(path.c_str(), body.dump(), "application/json");
  if (!r) return {0, ""};
  return {r->status, r->body};
}

json post(ServeProcess& s, const std::string& path, const json& body) {
  auto [status, text] = post_raw(s, path, body);
  EXPECT_EQ(status, 200) << body.dump() << " → " << text;
  return json::parse(text, nullptr, false);
}

// The whole text of a streamed completion (content deltas of chat, text of completions).
std::string streamed_text(ServeProcess& s, const std::string& path, json body) {
  body["stream"] = true;
  auto [status, text] = post_raw(s, path, body);
  EXPECT_EQ(status, 200) << text;
  std::string out;
  size_t at = 0;
  while ((at = text.find("data: ", at)) != std::string::npos) {
    const size_t end = text.find("\n\n", at);
    const std::string data = text.substr(at + 6, end - at - 6);
    at = end;
    if (data == "[DONE]") break;
    const json c = json::parse(data, nullptr, false);
    if (!c.is_object() || c["choices"].empty()) continue;
    const json& ch = c["choices"][0];
    if (ch.contains("text")) out += ch["text"].get<std::string>();
    if (ch.contains("delta") && ch["delta"].contains("content") &&
        ch["delta"]["content"].is_string())
      out += ch["delta"]["content"].get<std::string>();
  }
  return out;
}

json chat_body(const std::string& question, uint64_t seed) {
  return {{"messages", {{{"role", "user"}, {"content", question}}}},
          {"max_tokens", 200},
          {"temperature", 1.0},
          {"seed", seed}};
}

const json kInvoice = json::parse(R"({
  "type": "object",
  "properties": {
    "number": {"type": "string", "pattern": "^INV-[0-9]{4}$"},
    "total": {"type": "integer", "minimum": 0, "maximum": 100000},
    "currency": {"enum": ["EUR", "USD"]},
    "paid": {"type": "boolean"}
  },
  "required": ["number", "total", "currency"],
  "additionalProperties": false
})");

void expect_invoice(const std::string& text) {
  const json j = json::parse(text, nullptr, false);
  ASSERT_TRUE(j.is_object()) << text;
  EXPECT_TRUE(std::regex_match(j["number"].get<std::string>(), std::regex("INV-[0-9]{4}"))) << text;
  EXPECT_TRUE(j["total"].is_number_integer()) << text;
  EXPECT_TRUE(j["currency"] == "EUR" || j["currency"] == "USD") << text;
  for (auto& [k, v] : j.items())
    EXPECT_TRUE(k == "number" || k == "total" || k == "currency" || k == "paid") << text;
  // Properties come in schema order.
  EXPECT_EQ(text.rfind("{\"number\":", 0), 0u) << text;
}

class StructuredServe : public ::testing::Test {
 public:
  void SetUp() override { ASSERT_NE(hermes_server().port(), 0) << hermes_server().log(); }
};

TEST_F(StructuredServe, ResponseFormatJsonSchemaWholeAndStreamed) {
  for (uint64_t seed : {1, 2, 3}) {
    json body = chat_body("Extract the invoice.", seed);
    body["response_format"] = {
        {"type", "json_schema"},
        {"json_schema", {{"name", "invoice"}, {"strict", true}, {"schema", kInvoice}}}};
    const json r = post(hermes_server(), kChat, body);
    ASSERT_TRUE(r.contains("choices")) << r.dump();
    const std::string content = r["choices"][0]["message"]["content"];
    expect_invoice(content);
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop") << r.dump();
    EXPECT_EQ(streamed_text(hermes_server(), kChat, body), content) << "streamed = whole";
  }
  // The model left to itself writes no such object: the constraint did the work.
  const json free_run = post(hermes_server(), kChat, chat_body("Extract the invoice.", 1));
  ASSERT_TRUE(free_run.contains("choices")) << free_run.dump();
  EXPECT_FALSE(
      json::parse(free_run["choices"][0]["message"]["content"].get<std::string>(), nullptr, false)
          .is_object());
}

TEST_F(StructuredServe, EveryClientDialectConstrains) {
  struct Case {
    const char* path;
    json fields;
    std::function<bool(const std::string&)> ok;
  };
  const auto is_object = [](const std::string& t) {
    return json::parse(t, nullptr, false).is_object();
  };
  const auto yes_no = [](const std::string& t) { return t == "yes" || t == "no"; };
  const auto word = [](const std::string& t) {
    return std::regex_match(t, std::regex("[a-z]{1,3}"));
  };
  const std::vector<Case> cases = {
      {kChat, {{"response_format", {{"type", "json_object"}}}}, is_object},
      {kCompletions, {{"response_format", {{"type", "json_object"}}}}, is_object},
      {kCompletions,
       {{"response_format", {{"type", "json_object"}, {"schema", kInvoice}}}},
       [](const std::string& t) { return json::parse(t, nullptr, false).contains("number"); }},
      {kChat, {{"guided_choice", {"yes", "no"}}}, yes_no},
      {kCompletions, {{"structured_outputs", {{"choice", {"yes", "no"}}}}}, yes_no},
      {kChat, {{"guided_regex", "[a-z]{1,3}"}}, word},
      {kCompletions, {{"structured_outputs", {{"regex", "[a-z]{1,3}"}}}}, word},
      {kChat,
       {{"guided_json", kInvoice.dump()}},
       [](const std::string& t) { return json::parse(t, nullptr, false).contains("currency"); }},
      {kCompletions,
       {{"structured_outputs", {{"json", kInvoice}}}},
       [](const std::string& t) { return json::parse(t, nullptr, false).contains("total"); }},
      {kChat,
       {{"guided_grammar", "root ::= (\"ab\" | \"cd\")+ \".\""}},
       [](const std::string& t) { return std::regex_match(t, std::regex("(ab|cd)+\\.")); }},
      {kCompletions,
       {{"grammar", "root ::= [0-9]{2} \"-\" [0-9]{2}"}},
       [](const std::string& t) { return std::regex_match(t, std::regex("[0-9]{2}-[0-9]{2}")); }},
      {kChat,
       {{"json_schema",
         {{"type", "array"}, {"items", {{"type", "integer"}}}, {"minItems", 2}, {"maxItems", 4}}}},
       [](const std::string& t) {
         const json j = json::parse(t, nullptr, false);
         return j.is_array() && j.size() >= 2 && j.size() <= 4;
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.path) + " " + c.fields.dump());
    json body =
        std::string(c.path) == kChat
            ? chat_body("Answer.", 5)
            : json{{"prompt", "Answer:"}, {"max_tokens", 200}, {"temperature", 1.0}, {"seed", 5}};
    body.update(c.fields);
    const json r = post(hermes_server(), c.path, body);
    ASSERT_TRUE(r.contains("choices")) << r.dump();
    const json& ch = r["choices"][0];
    const std::string text = std::string(c.path) == kChat ? ch["message"]["content"] : ch["text"];
    EXPECT_TRUE(c.ok(text)) << "'" << text << "'";
    EXPECT_EQ(ch["finish_reason"], "stop") << r.dump();
  }
}

TEST_F(StructuredServe, BadAndHostileConstraintsAre400NamingTheField) {
  struct Case {
    json fields;
    std::string param, needle;
  };
  std::string huge = "{\"type\":\"object\",\"properties\":{";
  for (int i = 0; huge.size() < (1 << 20); ++i)
    huge += "\"p" + std::to_string(i) + "\":{\"type\":\"string\"},";
  huge += "\"last\":{\"type\":\"string\"}}}";
  const std::vector<Case> cases = {
      {{{"response_format",
         {{"type", "json_schema"},
          {"json_schema", {{"name", "x"}, {"schema", {{"type", "integer"}, {"multipleOf", 3}}}}}}}},
       "response_format",
       "multipleOf"},
      {{{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}}}},
       "response_format.json_schema.schema",
       "required"},
      {{{"response_format", {{"type", "yaml"}}}}, "response_format.type", "yaml"},
      {{{"guided_regex", "(a)\\1"}}, "guided_regex", "backreference"},
      {{{"guided_grammar", "root ::= root \"a\""}}, "guided_grammar", "left recursion"},
      {{{"grammar", "root ::= undefined"}}, "grammar", "undefined"},
      {{{"guided_choice", json::array()}}, "guided_choice", "non-empty"},
      {{{"structured_outputs", {{"regex", "a"}, {"choice", {"b"}}}}}, "structured_outputs", "both"},
      {{{"structured_outputs", {{"whitespace_pattern", " *"}, {"regex", "a"}}}},
       "structured_outputs.whitespace_pattern",
       "compact"},
      {{{"guided_regex", "a"}, {"guided_choice", {"b"}}}, "guided_choice", "both constrain"},
      {{{"guided_json", huge}}, "guided_json", "max_input_bytes"},
      {{{"guided_regex", "((a{1,100}){1,100}){1,100}"}}, "guided_regex", "max_repeat_states"},
      // Issue 51: ~30 bytes that once compiled and failed the step they ran in; now refused up
      // front, naming the limit and what the repetition expands to.
      {{{"guided_regex", "hello ([a-z]{0,300}){0,300}"}},
       "guided_regex",
       "(90000 states), more than 16384 (max_repeat_states)"},
  };
  // A refusal generates nothing: the server's count of generated tokens stands still.
  auto generated = [] {
    httplib::Client c("127.0.0.1", hermes_server().port());
    auto r = c.Get("/metrics");
    std::smatch m;
    const std::string body = r ? r->body : "";
    static const std::regex kLine("\ninvar_generated_tokens_total ([0-9.e+]+)");
    return std::regex_search(body, m, kLine) ? std::stod(m[1]) : -1.0;
  };
  const double generated_before = generated();
  ASSERT_GE(generated_before, 0.0) << "no invar_generated_tokens_total in /metrics";
  for (const Case& c : cases) {
    SCOPED_TRACE(c.fields.dump().substr(0, 200));
    json body = chat_body("Answer.", 1);
    body.update(c.fields);
    auto [status, text] = post_raw(hermes_server(), kChat, body);
    EXPECT_EQ(status, 400) << text;
    const json e = json::parse(text, nullptr, false);
    ASSERT_TRUE(e.contains("error")) << text;
    EXPECT_EQ(e["error"]["param"], c.param) << text;
    EXPECT_NE(e["error"]["message"].get<std::string>().find(c.needle), std::string::npos) << text;
  }
  EXPECT_EQ(generated(), generated_before) << "a refusal generated tokens";
  // The server is still serving.
  EXPECT_EQ(post_raw(hermes_server(), kChat, chat_body("Answer.", 1)).first, 200);
}

// The grammar tests' JSON Schema corpus (116 schemas, every supported keyword) through the real
// server at temperature 1: every completed output validates in python3-jsonschema (Draft
// 2020-12, formats checked), and a warm repeat of a request gives the same bytes.
TEST_F(StructuredServe, TheSchemaCorpusThroughTheServerValidates) {
  std::ifstream in(std::string(INVAR_TEST_DATA_DIR) + "/grammar/schemas.json");
  const json corpus = json::parse(in);
  ASSERT_GE(corpus.size(), 100u);
  std::vector<std::string> lines(corpus.size()), bodies(corpus.size()), answers(corpus.size());
  std::vector<int> finished(corpus.size(), 0);
  std::atomic<size_t> next{0};
  std::atomic<int> unspellable{0};
  std::string prompt = "Fill in the record from this document.";
  for (int k = 0; k < 8; ++k) prompt += " Invoice INV-" + std::to_string(4200 + k) + ", 3 items.";
  const auto worker = [&] {
    httplib::Client c("127.0.0.1", hermes_server().port());
    c.set_read_timeout(300, 0);
    for (size_t i; (i = next++) < corpus.size();) {
      const json body = {{"prompt", prompt},
                         {"max_tokens", 160},
                         {"temperature", 1.0},
                         {"seed", 100 + i},
                         {"logprobs", 2},
                         {"response_format",
                          {{"type", "json_schema"},
                           {"json_schema", {{"name", "s"}, {"schema", corpus[i]["schema"]}}}}}};
      bodies[i] = body.dump();
      auto r = c.Post(kCompletions, bodies[i], "application/json");
      if (!r) continue;
      answers[i] = r->body;
      // The tiny model's vocabulary has no non-ASCII byte: a schema whose output requires one
      // (non-ASCII enums and keys, a pattern of accented letters) is a clear 400 once the
      // output reaches it (the real vocabularies spell every byte).
      if (r->status == 400 && r->body.find("cannot spell") != std::string::npos) {
        ++unspellable;
        answers[i].clear();
        continue;
      }
      if (r->status != 200) continue;
      const json ch = json::parse(r->body)["choices"][0];
      if (ch["finish_reason"] != "stop") continue;  // cut by max_tokens: incomplete by design
      finished[i] = 1;
      lines[i] =
          json{{"name", corpus[i]["name"]}, {"schema", corpus[i]["schema"]}, {"text", ch["text"]}}
              .dump();
    }
  };
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) ts.emplace_back(worker);
  for (auto& t : ts) t.join();
  const std::string path =
      std::string(INVAR_BINARY_DIR) + "/tests/server/structured_corpus_outputs.jsonl";
  int n = 0;
  {
    std::ofstream out(path);
    for (size_t i = 0; i < corpus.size(); ++i) {
      if (answers[i].empty()) continue;  // unspellable here (above)
      EXPECT_EQ(json::parse(answers[i]).value("object", ""), "text_completion")
          << corpus[i]["name"] << ": " << answers[i].substr(0, 300);
      if (finished[i]) out << lines[i] << "\n", ++n;
    }
  }
  // Most outputs end by themselves well inside max_tokens; the rest are cut (not validated).
  EXPECT_LE(unspellable, 10);
  EXPECT_GE(n, int(corpus.size()) * 3 / 4) << n << " of " << corpus.size() << " completed";
  std::printf(
      "%d of %zu schemas completed within max_tokens, %d need bytes this vocabulary "
      "lacks\n",
      n, corpus.size(), unspellable.load());
  const std::string cmd = std::string(INVAR_PYTHON3) + " " + INVAR_SOURCE_DIR +
                          "/tests/grammar/validate_instances.py " + path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string report;
  char buf[4096];
  for (size_t k; (k = std::fread(buf, 1, sizeof buf, p)) > 0;) report.append(buf, k);
  EXPECT_EQ(pclose(p), 0) << report;
  EXPECT_NE(report.find("validated " + std::to_string(n) + " documents"), std::string::npos)
      << report;
  // Warm repeats (the prompt is cached now): the same bytes, logprobs included, minus the id.
  httplib::Client c("127.0.0.1", hermes_server().port());
  for (size_t i = 0; i < corpus.size(); i += 23) {
    if (answers[i].empty()) continue;
    auto r = c.Post(kCompletions, bodies[i], "application/json");
    ASSERT_TRUE(r && r->status == 200);
    json a = json::parse(answers[i]), b = json::parse(r->body);
    EXPECT_GT(b["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
    EXPECT_EQ(a["choices"], b["choices"]) << corpus[i]["name"];
  }
}

const json kWeather = json::parse(R"({"type": "function", "function": {
  "name": "get_weather", "description": "Weather in a city",
  "parameters": {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 20},
    "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city", "days"]}}})");
const json kTime = json::parse(R"({"type": "function", "function": {
  "name": "get_time", "parameters": {"type": "object", "properties": {
    "zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"]}}})");

// Every call parses, names an allowed tool and has its arguments' types. With one call at most
// the output ends after it ("tool_calls"); with parallel calls a model may go on writing calls
// until max_tokens ("length"), and every complete one still parses.
void expect_calls(const json& r, const std::set<std::string>& names, size_t max_calls) {
  ASSERT_TRUE(r.contains("choices")) << r.dump();
  const json& m = r["choices"][0]["message"];
  ASSERT_TRUE(m.contains("tool_calls") && m["tool_calls"].is_array()) << r.dump();
  ASSERT_GE(m["tool_calls"].size(), 1u) << r.dump();
  EXPECT_LE(m["tool_calls"].size(), max_calls) << r.dump();
  if (max_calls == 1)
    EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls") << r.dump();
  else
    EXPECT_TRUE(r["choices"][0]["finish_reason"] == "tool_calls" ||
                r["choices"][0]["finish_reason"] == "length")
        << r.dump();
  for (const json& c : m["tool_calls"]) {
    const std::string name = c["function"]["name"];
    EXPECT_TRUE(names.count(name)) << name;
    const json args = json::parse(c["function"]["arguments"].get<std::string>(), nullptr, false);
    ASSERT_TRUE(args.is_object()) << c.dump();
    if (name == "get_weather") {
      EXPECT_TRUE(args["city"].is_string()) << c.dump();
      EXPECT_TRUE(args["days"].is_number_integer()) << c.dump();
    } else {
      EXPECT_TRUE(args["zone"] == "UTC" || args["zone"] == "CET") << c.dump();
    }
  }
}

void tool_calls_always_parse(ServeProcess& s, const json& extra) {
  for (uint64_t seed : {1, 2, 3, 4}) {
    SCOPED_TRACE(seed);
    json body = chat_body("What is the weather in Paris?", seed);
    body["tools"] = {kWeather, kTime};
    body["max_tokens"] = 400;
    body.update(extra);
    // Without a constraint the model writes no call: tool_choice auto gives plain content.
    const json free_run = post(s, kChat, body);
    ASSERT_TRUE(free_run.contains("choices")) << free_run.dump();
    EXPECT_FALSE(free_run["choices"][0]["message"].contains("tool_calls")) << free_run.dump();
    body["tool_choice"] = "required";
    expect_calls(post(s, kChat, body), {"get_weather", "get_time"}, 100);
    body["parallel_tool_calls"] = false;
    expect_calls(post(s, kChat, body), {"get_weather", "get_time"}, 1);
    body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_time"}}}};
    expect_calls(post(s, kChat, body), {"get_time"}, 1);
  }
}

// tool_choice auto with a strict tool: the model still chooses, and the text it writes when it
// does not call is the unconstrained text (tool_choice none, same prompt), logprobs included (the
// mask only removes the tokens that would complete the opener; the grammar tests show a call it
// opens then parses: tests/grammar/frontends_test.cpp). The tiny vocabularies have no single-token
// opener, so a call cannot be forced here; the 400 shows the grammar is really built.
void strict_auto_leaves_text_alone(ServeProcess& s, const json& extra) {
  json weather = kWeather;
  weather["function"]["strict"] = true;
  for (const char* question : {"What is the weather in Paris?", "Hello", "Tell me a story."}) {
    SCOPED_TRACE(question);
    json body = chat_body(question, 1);
    body["max_tokens"] = 60;
    // Greedy: sampling would see the mask's other cut (bytes that are not UTF-8 text, control
    // tokens) in its normalisation, even where it never picks them.
    body["temperature"] = 0;
    body["logprobs"] = true;
    body["top_logprobs"] = 3;
    body.update(extra);
    body["tools"] = {weather, kTime};
    body["tool_choice"] = "none";  // the same prompt (the tools are rendered), no constraint
    const json loose = post(s, kChat, body);
    body["tool_choice"] = "auto";
    const json strict = post(s, kChat, body);
    ASSERT_TRUE(strict.contains("choices")) << strict.dump();
    EXPECT_FALSE(strict["choices"][0]["message"].contains("tool_calls")) << strict.dump();
    EXPECT_EQ(strict["choices"], loose["choices"]);
    body["response_format"] = {{"type", "json_object"}};
    auto [status, text] = post_raw(s, kChat, body);
    EXPECT_EQ(status, 400) << text;
    EXPECT_NE(text.find("a strict tool"), std::string::npos) << text;
  }
}

TEST_F(StructuredServe, StrictToolsUnderAutoLeaveTextAloneHermes) {
  strict_auto_leaves_text_alone(hermes_server(), json::object());
}

TEST_F(StructuredServe, StrictToolsUnderAutoLeaveTextAloneXml) {
  ASSERT_NE(xml_server().port(), 0) << xml_server().log();
  strict_auto_leaves_text_alone(xml_server(),
                                {{"chat_template_kwargs", {{"enable_thinking", false}}}});
}

TEST_F(StructuredServe, ToolChoiceRequiredAlwaysParsesHermes) {
  tool_calls_always_parse(hermes_server(), json::object());
}

TEST_F(StructuredServe, ToolChoiceRequiredAlwaysParsesXml) {
  ASSERT_NE(xml_server().port(), 0) << xml_server().log();
  tool_calls_always_parse(xml_server(), {{"chat_template_kwargs", {{"enable_thinking", false}}}});
}

TEST_F(StructuredServe, ResponseFormatAndRequiredToolsTogetherAre400) {
  json body = chat_body("x", 1);
  body["tools"] = {kWeather};
  body["tool_choice"] = "required";
  body["response_format"] = {{"type", "json_object"}};
  auto [status, text] = post_raw(hermes_server(), kChat, body);
  EXPECT_EQ(status, 400) << text;
  EXPECT_NE(text.find("both constrain"), std::string::npos) << text;
}

}  // namespace structured_output_serve_test
