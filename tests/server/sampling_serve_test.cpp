// The penalties, logit_bias and OpenAI's platform fields on the real `invar serve` (tiny model,
// real HTTP): logit_bias forces a token while the logprobs stay the model's own (vLLM's
// raw_logprobs); ids outside the vocabulary are a 400 naming logit_bias; penalised completions
// are the same bits cold and warm and differ from unpenalised ones; llama-server's
// repeat_penalty over the whole sequence is vLLM's repetition_penalty; service_tier is
// answered with the tier used; reasoning_effort drives the template's thinking switch (a
// replay server on the Qwen3.5 template) or is a 400 without one; parallel_tool_calls false
// returns the first of two calls, whole and streamed.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "serve_process.h"

namespace sampling_serve_test {

using namespace invar::server::testing;
using json = nlohmann::json;

namespace {

const char* kCompletions = "/v1/completions";
const char* kChat = "/v1/chat/completions";

ServeProcess& tiny_server() {
  static ServeProcess s({"--model", kTinyModel, "--threads", "1", "--ctx", "1024"},
                        "sampling_serve");
  return s;
}

std::pair<int, std::string> post_raw(ServeProcess& s, const std::string& path, const json& body) {
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(60, 0);
  auto r = c.Post(path.c_str(), body.dump(), "application/json");
  if (!r) return {0, ""};
  return {r->status, r->body};
}

json post(ServeProcess& s, const std::string& path, const json& body, int want = 200) {
  auto [status, text] = post_raw(s, path, body);
  EXPECT_EQ(status, want) << body.dump() << " → " << text;
  return json::parse(text, nullptr, false);
}

class SamplingServe : public ::testing::Test {
 public:
  void SetUp() override {
    ASSERT_NE(tiny_server().port(), 0) << "server did not start:\n" << tiny_server().log();
  }
};

json greedy_body() {
  return {{"prompt", "the cache keeps"},
          {"max_tokens", 1},
          {"temperature", 0},
          {"logprobs", 20},
          {"ignore_eos", true},
          {"return_tokens_as_token_ids", true}};
}

int32_t token_of(const json& token_text) {
  const std::string s = token_text;
  return std::atoi(s.c_str() + s.find(':') + 1);  // "token_id:N"
}

// A +100 bias makes the fifth candidate the token; its logprob, and the whole top-20 list, are
// those of the unbiased model output (vLLM's default logprobs_mode, raw_logprobs).
TEST_F(SamplingServe, LogitBiasForcesATokenAndLogprobsStayRaw) {
  const json plain = post(tiny_server(), kCompletions, greedy_body())["choices"][0]["logprobs"];
  ASSERT_EQ(plain["top_logprobs"][0].size(), 20u) << plain.dump();
  std::vector<std::pair<double, std::string>> ranked;
  for (auto& [tok, lp] : plain["top_logprobs"][0].items()) ranked.emplace_back(lp, tok);
  std::sort(ranked.rbegin(), ranked.rend());
  const std::string fifth = ranked[4].second;
  EXPECT_NE(plain["tokens"][0], fifth);
  json body = greedy_body();
  body["logit_bias"] = {{std::to_string(token_of(fifth)), 100}};
  const json biased = post(tiny_server(), kCompletions, body)["choices"][0]["logprobs"];
  EXPECT_EQ(biased["tokens"][0], fifth) << "the +100 bias did not choose the token";
  EXPECT_EQ(biased["token_logprobs"][0].dump(), json(ranked[4].first).dump())
      << "the token's logprob is not the model's own";
  EXPECT_EQ(biased["top_logprobs"][0].dump(), plain["top_logprobs"][0].dump());
  // -100 on the greedy token: the next best is chosen instead.
  body["logit_bias"] = {{std::to_string(token_of(plain["tokens"][0])), -100}};
  EXPECT_EQ(post(tiny_server(), kCompletions, body)["choices"][0]["logprobs"]["tokens"][0],
            ranked[1].second);
}

TEST_F(SamplingServe, LogitBiasOutsideTheVocabularyIsA400) {
  for (const char* path : {kCompletions, kChat}) {
    json body = std::string(path) == kChat
                    ? json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}}
                    : json{{"prompt", "hi"}};
    body["logit_bias"] = {{"5", 1}, {"99999999", 2}};
    auto [status, text] = post_raw(tiny_server(), path, body);
    EXPECT_EQ(status, 400) << text;
    const json e = json::parse(text, nullptr, false);
    EXPECT_EQ(e["error"]["param"], "logit_bias") << text;
    EXPECT_NE(e["error"]["message"].get<std::string>().find("99999999"), std::string::npos) << text;
  }
}

json penalised_body(const json& penalties) {
  std::string prompt;  // over one KV block (64 tokens), so that a second run hits the cache
  for (int i = 0; i < 40; ++i) prompt += "one two three ";
  json b = {{"prompt", prompt}, {"max_tokens", 24},   {"temperature", 0.8},       {"seed", 3},
            {"logprobs", 5},    {"ignore_eos", true}, {"cache_salt", "penalties"}};
  b.update(penalties);
  return b;
}

// Every penalty and a bias at once: the second run hits the cache and still answers the same
// bits; without penalties the answer differs. repeat_penalty with repeat_last_n -1 is
// repetition_penalty itself (the same rule over the same tokens).
TEST_F(SamplingServe, PenalisedCompletionsAreTheSameBitsColdAndWarm) {
  const json all = {{"presence_penalty", 0.8},
                    {"frequency_penalty", 0.5},
                    {"repetition_penalty", 1.4},
                    {"logit_bias", {{"11", 1.5}}}};
  const json cold = post(tiny_server(), kCompletions, penalised_body(all));
  const json warm = post(tiny_server(), kCompletions, penalised_body(all));
  EXPECT_GT(warm["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(cold["choices"].dump(), warm["choices"].dump());
  const json plain = post(tiny_server(), kCompletions, penalised_body(json::object()));
  EXPECT_NE(plain["choices"][0]["logprobs"]["tokens"], cold["choices"][0]["logprobs"]["tokens"]);

  const json vllm =
      post(tiny_server(), kCompletions, penalised_body({{"repetition_penalty", 1.6}}));
  const json llama = post(tiny_server(), kCompletions,
                          penalised_body({{"repeat_penalty", 1.6}, {"repeat_last_n", -1}}));
  EXPECT_EQ(vllm["choices"].dump(), llama["choices"].dump());
  EXPECT_NE(vllm["choices"][0]["logprobs"]["tokens"], plain["choices"][0]["logprobs"]["tokens"]);

  // Chat takes them too; greedy applies them.
  json chat = {{"messages", {{{"role", "user"}, {"content", "count with me"}}}},
               {"max_tokens", 16},
               {"temperature", 0},
               {"ignore_eos", true}};
  const json chat_plain = post(tiny_server(), kChat, chat);
  chat.update(all);
  const json chat_pen = post(tiny_server(), kChat, chat);
  EXPECT_NE(chat_plain["choices"][0]["message"]["content"],
            chat_pen["choices"][0]["message"]["content"]);
  EXPECT_EQ(chat_pen["choices"].dump(), post(tiny_server(), kChat, chat)["choices"].dump());
}

TEST_F(SamplingServe, ServiceTierIsAnsweredWithTheTierUsed) {
  json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}};
  EXPECT_FALSE(post(tiny_server(), kChat, body).contains("service_tier"));
  for (const char* tier : {"auto", "default", "flex", "priority"}) {
    body["service_tier"] = tier;
    EXPECT_EQ(post(tiny_server(), kChat, body)["service_tier"], "default") << tier;
  }
  body["stream"] = true;
  auto [status, text] = post_raw(tiny_server(), kChat, body);
  ASSERT_EQ(status, 200);
  int chunks = 0;
  for (auto& d : sse_data(text)) {
    if (d == "[DONE]") continue;
    EXPECT_EQ(json::parse(d)["service_tier"], "default") << d;
    ++chunks;
  }
  EXPECT_GT(chunks, 1);
}

TEST_F(SamplingServe, ReasoningEffortWithoutAThinkingSwitchIsA400) {
  auto [status, text] = post_raw(
      tiny_server(), kChat,
      {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"reasoning_effort", "low"}});
  EXPECT_EQ(status, 400) << text;
  const json e = json::parse(text, nullptr, false);
  EXPECT_EQ(e["error"]["param"], "reasoning_effort") << text;
  EXPECT_NE(e["error"]["message"].get<std::string>().find("thinking switch"), std::string::npos);
}

// A list of prompts is one engine request per prompt with n choices each, numbered prompt-major:
// choice p·n + i is the bits prompt p gives alone with the same seed (its choice i: seed + i),
// whole and streamed, and usage counts each prompt once.
TEST_F(SamplingServe, PromptListIsOneRequestPerPromptPromptMajor) {
  const json prompts = json::array({"the cache keeps", json::array({11, 12, 13, 14, 15, 16})});
  const json body = {{"prompt", prompts}, {"n", 2},        {"max_tokens", 3},   {"temperature", 1},
                     {"seed", 7},         {"logprobs", 2}, {"ignore_eos", true}};
  const json all = post(tiny_server(), kCompletions, body);
  ASSERT_EQ(all["choices"].size(), 4u) << all.dump();
  int64_t prompt_tokens = 0, completion_tokens = 0;
  std::set<std::string> texts;
  for (size_t p = 0; p < 2; ++p) {
    json one = body;
    one["prompt"] = prompts[p];
    const json alone = post(tiny_server(), kCompletions, one);
    ASSERT_EQ(alone["choices"].size(), 2u);
    prompt_tokens += alone["usage"]["prompt_tokens"].get<int64_t>();
    completion_tokens += alone["usage"]["completion_tokens"].get<int64_t>();
    for (size_t i = 0; i < 2; ++i) {
      const json& c = all["choices"][p * 2 + i];
      EXPECT_EQ(c["index"], p * 2 + i);
      EXPECT_EQ(c["text"], alone["choices"][i]["text"]) << "prompt " << p << " choice " << i;
      EXPECT_EQ(c["logprobs"], alone["choices"][i]["logprobs"]) << "prompt " << p;
      texts.insert(c["logprobs"].dump());
    }
  }
  EXPECT_EQ(texts.size(), 4u) << "two prompts, two seeds: four different choices";
  EXPECT_EQ(all["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(all["usage"]["completion_tokens"], completion_tokens);

  json streamed = body;
  streamed["stream"] = true;
  streamed["stream_options"] = {{"include_usage", true}};
  auto [status, text] = post_raw(tiny_server(), kCompletions, streamed);
  ASSERT_EQ(status, 200) << text;
  std::vector<std::string> by_index(4);
  json usage;
  for (const std::string& d : sse_data(text)) {
    if (d == "[DONE]") continue;
    const json c = json::parse(d);
    if (c.contains("usage") && !c["usage"].is_null()) usage = c["usage"];
    for (const json& ch : c["choices"]) by_index.at(ch["index"].get<size_t>()) += ch["text"];
  }
  for (size_t k = 0; k < 4; ++k) EXPECT_EQ(by_index[k], all["choices"][k]["text"]) << k;
  EXPECT_EQ(usage["prompt_tokens"], prompt_tokens) << text;
}

// stream_options.continuous_usage_stats (vLLM): with include_usage, every chunk with a choice
// carries the usage so far — completion tokens never decreasing, summed over the choices of n —
// and the last usage is the whole answer's.
TEST_F(SamplingServe, ContinuousUsageIsInEveryChunk) {
  for (const auto& [path, n] :
       std::vector<std::pair<const char*, int>>{{kCompletions, 1}, {kCompletions, 2}, {kChat, 1}}) {
    json body = {{"n", n},
                 {"max_tokens", 4},
                 {"temperature", 1},
                 {"seed", 3},
                 {"ignore_eos", true},
                 {"stream", true},
                 {"stream_options", {{"include_usage", true}, {"continuous_usage_stats", true}}}};
    if (path == kChat)
      body["messages"] = {{{"role", "user"}, {"content", "the cache keeps"}}};
    else
      body["prompt"] = "the cache keeps";
    auto [status, text] = post_raw(tiny_server(), path, body);
    ASSERT_EQ(status, 200) << text;
    int64_t last = -1, chunks = 0;
    json final_usage;
    for (const std::string& d : sse_data(text)) {
      if (d == "[DONE]") continue;
      const json c = json::parse(d);
      ASSERT_TRUE(c.contains("usage") && c["usage"].is_object()) << path << " n=" << n << ": " << d;
      if (c["choices"].empty()) {
        final_usage = c["usage"];
        continue;
      }
      ++chunks;
      const int64_t done = c["usage"]["completion_tokens"].get<int64_t>();
      EXPECT_GE(done, last) << d;
      EXPECT_GT(c["usage"]["prompt_tokens"].get<int64_t>(), 0) << d;
      last = done;
    }
    EXPECT_GE(chunks, n) << text;
    ASSERT_TRUE(final_usage.is_object()) << text;
    EXPECT_EQ(final_usage["completion_tokens"], 4 * n);
    EXPECT_EQ(last, 4 * n) << "the last chunk's usage is the whole answer's";
  }
}

// A replay server on the Qwen3.5 template (it has enable_thinking); its outputs are written here.
ServeProcess& replay_server() {
  static const std::string outputs = [] {
    const std::string path = std::string(INVAR_BINARY_DIR) + "/tests/server/sampling_replay.json";
    const std::string call = [](const char* city) {
      return std::string("<tool_call>\n<function=get_weather>\n<parameter=city>\n") + city +
             "\n</parameter>\n</function>\n</tool_call>";
    }("Paris");
    json o = {{"two cities",
               "Both cities.\n</think>\n\n" + call + "\n" +
                   "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n"
                   "</function>\n</tool_call>"},
              {"think about it", "Thought.\n</think>\n\nDone."}};
    std::ofstream(path) << o.dump();
    return path;
  }();
  static ServeProcess s(
      {"--model", std::string(INVAR_TEST_DATA_DIR) + "/models/qwen35-tiny.gguf", "--chat-template",
       std::string(INVAR_TEST_DATA_DIR) + "/chat-templates/Qwen3.5-4B.jinja", "--replay-outputs",
       outputs},
      "sampling_replay");
  return s;
}

json weather_tool() {
  return json::parse(R"({"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}})");
}

// none / minimal render the template's thinking-off prompt (the output then has no reasoning
// part), low..high the thinking one: exactly what chat_template_kwargs.enable_thinking gives.
TEST(SamplingReplay, ReasoningEffortDrivesTheThinkingSwitch) {
  ASSERT_NE(replay_server().port(), 0) << replay_server().log();
  const json msgs = {{{"role", "user"}, {"content", "think about it"}}};
  auto ask = [&](const json& extra) {
    json b = {{"model", "replay"}, {"messages", msgs}};
    b.update(extra);
    return post(replay_server(), kChat, b);
  };
  for (bool thinking : {false, true}) {
    const json direct = ask({{"chat_template_kwargs", {{"enable_thinking", thinking}}}});
    for (const char* effort : thinking ? std::vector<const char*>{"minimal", "low", "high", "max"}
                                       : std::vector<const char*>{"none"}) {
      const json r = ask({{"reasoning_effort", effort}});
      EXPECT_EQ(r["usage"]["prompt_tokens"], direct["usage"]["prompt_tokens"]) << effort;
      EXPECT_EQ(r["choices"][0]["message"].dump(), direct["choices"][0]["message"].dump())
          << effort;
      EXPECT_EQ(r["choices"][0]["message"].contains("reasoning_content"), thinking)
          << effort << ": " << r.dump();
    }
  }
  const json conflict = post(replay_server(), kChat,
                             {{"model", "replay"},
                              {"messages", msgs},
                              {"reasoning_effort", "none"},
                              {"chat_template_kwargs", {{"enable_thinking", true}}}},
                             400);
  EXPECT_EQ(conflict["error"]["param"], "reasoning_effort");
}

TEST(SamplingReplay, ParallelToolCallsFalseReturnsTheFirstCall) {
  ASSERT_NE(replay_server().port(), 0) << replay_server().log();
  for (bool parallel : {true, false}) {
    json b = {{"model", "replay"},
              {"messages", {{{"role", "user"}, {"content", "weather in two cities"}}}},
              {"tools", {weather_tool()}},
              {"parallel_tool_calls", parallel}};
    const json whole = post(replay_server(), kChat, b);
    const json& calls = whole["choices"][0]["message"]["tool_calls"];
    ASSERT_EQ(calls.size(), parallel ? 2u : 1u) << whole.dump();
    EXPECT_EQ(calls[0]["function"]["arguments"], "{\"city\":\"Paris\"}");
    EXPECT_EQ(whole["choices"][0]["finish_reason"], "tool_calls");
    b["stream"] = true;
    auto [status, text] = post_raw(replay_server(), kChat, b);
    ASSERT_EQ(status, 200);
    std::set<int> indices;
    std::string finish;
    for (auto& d : sse_data(text)) {
      if (d == "[DONE]") continue;
      const json c = json::parse(d);
      if (c["choices"].empty()) continue;
      for (auto& tc : c["choices"][0]["delta"].value("tool_calls", json::array()))
        indices.insert(tc["index"].get<int>());
      if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
    }
    EXPECT_EQ(indices, parallel ? (std::set<int>{0, 1}) : (std::set<int>{0})) << text;
    EXPECT_EQ(finish, "tool_calls");
  }
}

}  // namespace

}  // namespace sampling_serve_test
