// The penalty and logit_bias fields parsed into the request (ranges, llama-server's
// repeat_penalty mapped onto vLLM's rule with its window, 400s naming the field), and the chat
// fields OpenAI defines for its platform: parallel_tool_calls (the first call only, whole and
// streamed), metadata (OpenAI's limits), service_tier, store and reasoning_effort (the
// template's thinking switch).
#include <gtest/gtest.h>

#include <set>

#include "parse_rejection.h"
#include "server/api_error.h"
#include "server/api_request.h"
#include "server/chat_output.h"

namespace invar::server {
namespace sampling_fields_test {

using ojson = nlohmann::ordered_json;

ApiRequest parse(const std::string& body, Endpoint ep = Endpoint::completions) {
  return api_request_parse(body, ep);
}

void expect_rejected(const std::string& body, const std::string& param,
                     Endpoint ep = Endpoint::completions) {
  const ApiError e = invar::server::testing::parse_rejection(body, ep);
  EXPECT_EQ(e.status, 400) << body;
  EXPECT_EQ(e.param, param) << body << " → " << e.message;
  EXPECT_NE(e.message.find(param), std::string::npos) << body << " → " << e.message;
}

// Every range is the engine's one check (engine/request_check.h), worded once: each
// out-of-range value gets the same 400 from completions and chat.
TEST(SamplingFields, EachRangeHasOneWordingOnBothEndpoints) {
  const std::pair<const char*, const char*> cases[] = {
      {R"("temperature":2.5)", "'temperature' must be in [0, 2], got 2.5"},
      {R"("top_p":0)", "'top_p' must be in (0, 1], got 0"},
      {R"("top_k":-2)", "'top_k' must be between -1 and 2147483647, got -2"},
      {R"("min_p":1.5)", "'min_p' must be in [0, 1], got 1.5"},
      {R"("presence_penalty":3)", "'presence_penalty' must be in [-2, 2], got 3"},
      {R"("frequency_penalty":-2.5)", "'frequency_penalty' must be in [-2, 2], got -2.5"},
      {R"("repetition_penalty":0)", "'repetition_penalty' must be in (0, 100], got 0"},
      {R"("repeat_penalty":101)", "'repeat_penalty' must be in (0, 100], got 101"},
      {R"("repeat_last_n":-2)", "'repeat_last_n' must be between -1 and 2147483647, got -2"},
      {R"("logit_bias":{"05":101})",
       "'logit_bias' values must be numbers in [-100, 100], got 101 for token 05"},
      {R"("prompt_logprobs":21)", "'prompt_logprobs' must be between 0 and 20, got 21"},
      {R"("prompt_logprobs":-1)", "'prompt_logprobs' must be between 0 and 20, got -1"},
      {R"("stop":["a",""])", "'stop' strings must not be empty"},
      {R"("min_tokens":-1)", "'min_tokens' must be between 0 and 2147483647, got -1"},
      {R"("max_tokens":2,"min_tokens":3)", "'min_tokens' must be at most 'max_tokens' (2), got 3"},
  };
  for (const auto& [field, message] : cases) {
    const std::string completions = std::string(R"({"prompt":"a",)") + field + "}";
    const std::string chat =
        std::string(R"({"messages":[{"role":"user","content":"a"}],)") + field + "}";
    const ApiError a = invar::server::testing::parse_rejection(completions);
    const ApiError b = invar::server::testing::parse_rejection(chat, Endpoint::chat);
    EXPECT_EQ(a.message, message) << completions;
    EXPECT_EQ(b.message, message) << chat;
    EXPECT_EQ(a.param, b.param) << field;
    EXPECT_EQ(a.status, 400);
  }
  // The logprob count is one range under each endpoint's name for it.
  EXPECT_EQ(invar::server::testing::parse_rejection(R"({"prompt":"a","logprobs":21})").message,
            "'logprobs' must be between 0 and 20, got 21");
  EXPECT_EQ(invar::server::testing::parse_rejection(
                R"({"messages":[{"role":"user","content":"a"}],"logprobs":true,"top_logprobs":21})",
                Endpoint::chat)
                .message,
            "'top_logprobs' must be between 0 and 20, got 21");
}

TEST(SamplingFields, PenaltiesParseWithVllmRanges) {
  ApiRequest r = parse(
      R"({"prompt":"a","presence_penalty":1.5,"frequency_penalty":-0.25,
          "repetition_penalty":1.2})");
  EXPECT_EQ(r.sampling.presence_penalty, 1.5f);
  EXPECT_EQ(r.sampling.frequency_penalty, -0.25f);
  EXPECT_EQ(r.sampling.repetition_penalty, 1.2f);
  EXPECT_EQ(r.sampling.repetition_last_n, -1) << "vLLM's repetition_penalty sees every token";
  r = parse(R"({"prompt":"a"})");
  EXPECT_EQ(r.sampling.presence_penalty, 0.0f);
  EXPECT_EQ(r.sampling.frequency_penalty, 0.0f);
  EXPECT_EQ(r.sampling.repetition_penalty, 1.0f);
  EXPECT_TRUE(r.sampling.logit_bias.empty());
  expect_rejected(R"({"prompt":"a","presence_penalty":2.5})", "presence_penalty");
  expect_rejected(R"({"prompt":"a","frequency_penalty":"1"})", "frequency_penalty");
  expect_rejected(R"({"prompt":"a","repetition_penalty":0})", "repetition_penalty");
  expect_rejected(R"({"prompt":"a","repetition_penalty":-1})", "repetition_penalty");
  expect_rejected(R"({"prompt":"a","repetition_penalty":101})", "repetition_penalty");
}

// llama-server's repeat_penalty is vLLM's multiplicative rule over a window: its last 64
// tokens by default, repeat_last_n when given (-1 all, 0 none).
TEST(SamplingFields, RepeatPenaltyIsTheRepetitionRuleOverAWindow) {
  ApiRequest r = parse(R"({"prompt":"a","repeat_penalty":1.3})");
  EXPECT_EQ(r.sampling.repetition_penalty, 1.3f);
  EXPECT_EQ(r.sampling.repetition_last_n, 64);
  r = parse(R"({"prompt":"a","repeat_penalty":1.3,"repeat_last_n":8})");
  EXPECT_EQ(r.sampling.repetition_last_n, 8);
  r = parse(R"({"prompt":"a","repeat_penalty":1.3,"repeat_last_n":-1})");
  EXPECT_EQ(r.sampling.repetition_last_n, -1);
  r = parse(R"({"prompt":"a","repetition_penalty":1.3,"repeat_last_n":5})");
  EXPECT_EQ(r.sampling.repetition_last_n, 5)
      << "repeat_last_n sets the window whichever name set the rule";
  r = parse(R"({"prompt":"a","repeat_penalty":1,"repetition_penalty":1.1})");
  EXPECT_EQ(r.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(r.sampling.repetition_last_n, -1);
  expect_rejected(R"({"prompt":"a","repeat_penalty":1.1,"repetition_penalty":1.2})",
                  "repeat_penalty");
  expect_rejected(R"({"prompt":"a","repeat_penalty":1.1,"repeat_last_n":-2})", "repeat_last_n");
  expect_rejected(R"({"prompt":"a","repeat_last_n":1.5})", "repeat_last_n");
}

TEST(SamplingFields, LogitBiasKeysAreTokenIdsAndValuesInRange) {
  ApiRequest r = parse(R"({"prompt":"a","logit_bias":{"300":-100,"7":2.5,"0":100}})");
  EXPECT_EQ(r.sampling.logit_bias,
            (std::vector<std::pair<int32_t, float>>{{0, 100.0f}, {7, 2.5f}, {300, -100.0f}}));
  EXPECT_TRUE(parse(R"({"prompt":"a","logit_bias":{}})").sampling.logit_bias.empty());
  for (const char* bad :
       {R"({"prompt":"a","logit_bias":{"x":1}})", R"({"prompt":"a","logit_bias":{"-1":1}})",
        R"({"prompt":"a","logit_bias":{"":1}})", R"({"prompt":"a","logit_bias":{"1.5":1}})",
        R"({"prompt":"a","logit_bias":{"99999999999":1}})",
        R"({"prompt":"a","logit_bias":{"5":100.5}})", R"({"prompt":"a","logit_bias":{"5":"1"}})",
        R"({"prompt":"a","logit_bias":{"5":1,"05":2}})", R"({"prompt":"a","logit_bias":[1]})",
        R"({"prompt":"a","logit_bias":{"5":null}})"})
    expect_rejected(bad, "logit_bias");
}

const char* kUser = R"([{"role":"user","content":"x"}])";

std::string chat(const std::string& extra) {
  return std::string(R"({"messages":)") + kUser + extra + "}";
}

TEST(SamplingFields, PlatformFieldsAsOpenAiDefinesThem) {
  EXPECT_EQ(parse(chat(R"(,"service_tier":"priority")"), Endpoint::chat).service_tier, "priority");
  EXPECT_EQ(parse(chat(""), Endpoint::chat).service_tier, "");
  for (const char* t : {"auto", "default", "flex", "priority"})
    EXPECT_NO_THROW(parse(chat(std::string(R"(,"service_tier":")") + t + "\""), Endpoint::chat));
  expect_rejected(chat(R"(,"service_tier":"fast")"), "service_tier", Endpoint::chat);
  expect_rejected(chat(R"(,"service_tier":1)"), "service_tier", Endpoint::chat);

  EXPECT_NO_THROW(parse(chat(R"(,"store":false)"), Endpoint::chat));
  expect_rejected(chat(R"(,"store":true)"), "store", Endpoint::chat);

  // metadata: 16 pairs, keys ≤ 64 characters, string values ≤ 512 characters.
  ojson md = ojson::object();
  for (int i = 0; i < 16; ++i) md["k" + std::to_string(i)] = std::string(512, 'v');
  md[std::string(61, 'k') + "\xc3\xa9"] = "x";  // 62 characters, 63 bytes: in; replaces k15
  md.erase("k15");
  EXPECT_NO_THROW(parse(chat(",\"metadata\":" + md.dump()), Endpoint::chat));
  md["one-more"] = "x";
  expect_rejected(chat(",\"metadata\":" + md.dump()), "metadata", Endpoint::chat);
  expect_rejected(chat(R"(,"metadata":{")" + std::string(65, 'k') + R"(":"x"})"), "metadata",
                  Endpoint::chat);
  expect_rejected(chat(R"(,"metadata":{"k":")" + std::string(513, 'v') + R"("})"), "metadata.k",
                  Endpoint::chat);
  expect_rejected(chat(R"(,"metadata":{"k":1})"), "metadata.k", Endpoint::chat);
  expect_rejected(chat(R"(,"metadata":"x")"), "metadata", Endpoint::chat);
  expect_rejected(R"({"prompt":"a","metadata":{}})", "metadata");  // chat only, as OpenAI
}

TEST(SamplingFields, ReasoningEffortSetsTheThinkingSwitch) {
  auto kwargs = [](const std::string& extra) {
    return parse(chat(extra), Endpoint::chat).chat.request["chat_template_kwargs"];
  };
  // vLLM's meaning: only none turns thinking off; the effort is a template variable too.
  EXPECT_EQ(kwargs(R"(,"reasoning_effort":"none")"),
            ojson({{"enable_thinking", false}, {"reasoning_effort", "none"}}));
  for (const char* on : {"minimal", "low", "medium", "high", "xhigh", "max"}) {
    const ojson kw = kwargs(std::string(R"(,"reasoning_effort":")") + on + "\"");
    EXPECT_EQ(kw["enable_thinking"], true) << on;
    EXPECT_EQ(kw["reasoning_effort"], on) << on;
  }
  // Other template variables stay; an agreeing enable_thinking is no conflict.
  const ojson kw =
      kwargs(R"(,"reasoning_effort":"high","chat_template_kwargs":{"x":1,"enable_thinking":true})");
  EXPECT_EQ(kw["x"], 1);
  EXPECT_EQ(kw["enable_thinking"], true);
  EXPECT_EQ(parse(chat(R"(,"reasoning_effort":"low")"), Endpoint::chat).chat.reasoning_effort,
            "low");
  EXPECT_FALSE(parse(chat(""), Endpoint::chat).chat.request.contains("chat_template_kwargs"));
  expect_rejected(chat(R"(,"reasoning_effort":"maximal")"), "reasoning_effort", Endpoint::chat);
  expect_rejected(
      chat(R"(,"reasoning_effort":"low","chat_template_kwargs":{"reasoning_effort":"high"})"),
      "reasoning_effort", Endpoint::chat);
  expect_rejected(chat(R"(,"reasoning_effort":2)"), "reasoning_effort", Endpoint::chat);
  expect_rejected(
      chat(R"(,"reasoning_effort":"none","chat_template_kwargs":{"enable_thinking":true})"),
      "reasoning_effort", Endpoint::chat);

  ChatTemplateConfig with, without;
  with.source = "{% if enable_thinking is defined and not enable_thinking %}off{% endif %}";
  without.source = "{{ messages[0].content }}";
  EXPECT_TRUE(ChatPrompt(with).thinking_switch());
  EXPECT_FALSE(ChatPrompt(without).thinking_switch());
  // A template that grades its thinking by the effort reads it as a variable.
  ChatTemplateConfig graded;
  graded.source = "effort={{ reasoning_effort }} thinking={{ enable_thinking }}";
  EXPECT_EQ(ChatPrompt(graded)
                .render(parse(chat(R"(,"reasoning_effort":"max")"), Endpoint::chat).chat, nullptr)
                .text,
            "effort=max thinking=True");
}

const char* kTool =
    R"({"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}})";

ChatOutput output_of(const std::string& extra) {
  ChatTemplateConfig cfg;
  cfg.source = "{{ '<tool_call>' }}";  // hermes
  cfg.origin = "test";
  static const ChatPrompt prompt(cfg);
  return ChatOutput(
      prompt, parse(chat(std::string(R"(,"tools":[)") + kTool + "]" + extra), Endpoint::chat).chat,
      false);
}

// Two calls written: both returned by default; with parallel_tool_calls false only the first,
// in the whole message and in the stream deltas alike.
TEST(SamplingFields, ParallelToolCallsFalseReturnsTheFirstCallOnly) {
  const std::string two =
      "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"A\"}}</tool_call>\n"
      "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"B\"}}</tool_call>";
  for (bool parallel : {true, false}) {
    SCOPED_TRACE(parallel ? "parallel" : "one call");
    ChatOutput whole = output_of(parallel ? "" : R"(,"parallel_tool_calls":false)");
    whole.feed(two);
    whole.finish();
    const json m = whole.message_json();
    ASSERT_EQ(m["tool_calls"].size(), parallel ? 2u : 1u) << m.dump();
    EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], "{\"city\":\"A\"}");
    EXPECT_EQ(whole.finish_reason("stop"), "tool_calls");

    ChatOutput streamed = output_of(parallel ? "" : R"(,"parallel_tool_calls":false)");
    std::set<size_t> indices;
    std::string args0;
    auto take = [&](const chat::OutputDelta& d) {
      for (const auto& c : d.tool_calls) {
        indices.insert(c.index);
        if (c.index == 0) args0 += c.arguments;
      }
    };
    for (size_t i = 0; i < two.size(); i += 7) take(streamed.feed(two.substr(i, 7)));
    take(streamed.finish());
    EXPECT_EQ(indices, parallel ? (std::set<size_t>{0, 1}) : (std::set<size_t>{0}));
    EXPECT_EQ(args0, "{\"city\":\"A\"}");
  }
  EXPECT_TRUE(
      parse(chat(R"(,"parallel_tool_calls":false)"), Endpoint::chat).chat.parallel_tool_calls ==
      false);
  expect_rejected(chat(R"(,"parallel_tool_calls":"no")"), "parallel_tool_calls", Endpoint::chat);
}

}  // namespace sampling_fields_test
}  // namespace invar::server
