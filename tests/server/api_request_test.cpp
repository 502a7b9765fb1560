// Request parsing: accepted shapes map to the right fields; every rejection is a 400 that names
// the field.
#include "server/api_request.h"

#include <gtest/gtest.h>

#include "parse_rejection.h"
#include "server/api_error.h"

namespace api_request_test {

using namespace invar::server;

namespace {

ApiError reject(const std::string& body, Endpoint ep = Endpoint::completions) {
  return invar::server::testing::parse_rejection(body, ep);
}

}  // namespace

TEST(ApiRequest, CompletionFields) {
  ApiRequest r = api_request_parse(
      R"({"model":"m","prompt":"hi","max_tokens":7,"temperature":0,"top_p":0.5,"top_k":3,
          "seed":42,"stop":["x","yz"],"stream":true,"stream_options":{"include_usage":true},
          "logprobs":5,"echo":true,"cache_salt":"s","n":1,"user":"u"})",
      Endpoint::completions);
  EXPECT_EQ(r.model, "m");
  ASSERT_TRUE(r.prompt_text);
  EXPECT_EQ(*r.prompt_text, "hi");
  EXPECT_EQ(*r.max_tokens, 7);
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 3);
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"x", "yz"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 5);
  EXPECT_TRUE(r.echo);
  EXPECT_EQ(r.cache_salt, "s");
}

TEST(ApiRequest, PromptForms) {
  EXPECT_EQ(api_request_parse(R"({"prompt":[1,2,3]})", Endpoint::completions).prompt_ids,
            (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(api_request_parse(R"({"prompt":[[4,5]]})", Endpoint::completions).prompt_ids,
            (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(*api_request_parse(R"({"prompt":["one"]})", Endpoint::completions).prompt_text, "one");
  // A list of prompts: the first in prompt_text / prompt_ids, the rest in more_prompts.
  const ApiRequest list = api_request_parse(R"({"prompt":["a",[7,8],"c"]})", Endpoint::completions);
  EXPECT_EQ(*list.prompt_text, "a");
  ASSERT_EQ(list.more_prompts.size(), 2u);
  EXPECT_FALSE(list.more_prompts[0].text);
  EXPECT_EQ(list.more_prompts[0].ids, (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(*list.more_prompts[1].text, "c");
  EXPECT_EQ(reject(R"({"prompt":["a",""]})").param, "prompt[1]");
  EXPECT_EQ(reject(R"({"prompt":["a",5]})").param, "prompt[1]");
  EXPECT_EQ(reject(R"({"prompt":[[1],[2,-1]]})").param, "prompt[1][1]");
  EXPECT_EQ(reject(R"({"prompt":["a",[]]})").param, "prompt[1]");
  std::string many = R"({"prompt":[)";
  for (int i = 0; i <= kMaxPrompts; ++i) many += std::string(i ? "," : "") + "\"p\"";
  EXPECT_EQ(reject(many + "]}").param, "prompt") << "more than kMaxPrompts";
  EXPECT_EQ(reject(R"({"prompt":[1,-2]})").param, "prompt[1]");
  EXPECT_EQ(reject(R"({"prompt":[1,"a"]})").param, "prompt[1]");
  EXPECT_EQ(reject(R"({"prompt":[]})").param, "prompt");
  EXPECT_EQ(reject(R"({"prompt":""})").param, "prompt");
  EXPECT_EQ(reject(R"({"prompt":5})").param, "prompt");
  EXPECT_EQ(reject(R"({"max_tokens":5})").param, "prompt");
}

TEST(ApiRequest, ChatFields) {
  ApiRequest r = api_request_parse(
      R"({"messages":[{"role":"system","content":"s"},
                      {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
          "logprobs":true,"top_logprobs":20,"max_completion_tokens":9,"max_tokens":3})",
      Endpoint::chat);
  ASSERT_EQ(r.chat.request["messages"].size(), 2u);
  EXPECT_EQ(r.chat.request["messages"][0]["role"], "system");
  EXPECT_EQ(r.chat.request["messages"][1]["content"][1]["text"], "b");
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 20);
  EXPECT_EQ(*r.max_tokens, 9);  // max_completion_tokens wins
  EXPECT_EQ(reject(R"({"messages":[]})", Endpoint::chat).param, "messages");
  EXPECT_EQ(reject(R"({"messages":[{"role":"robot","content":"x"}]})", Endpoint::chat).param,
            "messages[0].role");
  EXPECT_EQ(reject(R"({"messages":[{"content":"x"}]})", Endpoint::chat).param, "messages[0].role");
  EXPECT_EQ(
      reject(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", Endpoint::chat)
          .param,
      "messages[0].content[0].image_url");
  EXPECT_EQ(
      reject(R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", Endpoint::chat)
          .param,
      "top_logprobs");
  EXPECT_EQ(
      reject(R"({"messages":[{"role":"user","content":"x"}],"logprobs":3})", Endpoint::chat).param,
      "logprobs");
}

TEST(ApiRequest, RangesAndUnsupported) {
  struct Case {
    const char* body;
    const char* param;
  } cases[] = {
      {R"({"prompt":"a","max_tokens":0})", "max_tokens"},
      {R"({"prompt":"a","max_tokens":1.5})", "max_tokens"},
      {R"({"prompt":"a","max_tokens":"5"})", "max_tokens"},
      {R"({"prompt":"a","max_tokens":99999999999999999999})", "max_tokens"},
      {R"({"prompt":"a","temperature":2.5})", "temperature"},
      {R"({"prompt":"a","temperature":"hot"})", "temperature"},
      {R"({"prompt":"a","top_p":0})", "top_p"},
      {R"({"prompt":"a","top_k":-2})", "top_k"},
      {R"({"prompt":"a","logprobs":21})", "logprobs"},
      {R"({"prompt":"a","logprobs":true})", "logprobs"},
      {R"({"prompt":"a","n":0})", "n"},
      {R"({"prompt":"a","unknown":{"a":[1]}})", "unknown"},
      {R"({"prompt":"a","best_of":3})", "best_of"},
      {R"({"prompt":"a","presence_penalty":2.5})", "presence_penalty"},
      {R"({"prompt":"a","frequency_penalty":-3})", "frequency_penalty"},
      {R"({"prompt":"a","logit_bias":{"5":101}})", "logit_bias"},
      {R"({"prompt":"a","suffix":"z"})", "suffix"},
      {R"({"prompt":"a","stop":""})", "stop"},
      {R"({"prompt":"a","stop":[1]})", "stop[0]"},
      {R"({"prompt":"a","stream":"yes"})", "stream"},
      {R"({"prompt":"a","stream_options":{"include_usage":1}})", "stream_options.include_usage"},
      {R"({"prompt":"a","seed":1.5})", "seed"},
      {R"({"prompt":"a","cache_salt":7})", "cache_salt"},
      {R"({"prompt":"a","model":7})", "model"},
      {R"({"prompt":"a","tools":[{"type":"function"}]})", "tools"},
  };
  for (auto& c : cases) {
    ApiError e = reject(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_NE(e.message.find(c.param), std::string::npos) << c.body << " → " << e.message;
  }
  // Defaults that change nothing are accepted.
  api_request_parse(R"({"prompt":"a","n":1,"best_of":1,"presence_penalty":0,"logit_bias":{},
                        "suffix":"","top_k":-1,"max_tokens":null,"seed":-1})",
                    Endpoint::completions);
}

TEST(ApiRequest, MalformedBodies) {
  for (const char* body : {"", "{", "[]", "null", "\"x\"", "{\"prompt\":\"a\",}", "{'prompt':'a'}",
                           "{\"prompt\":\"\xff\"}", "{\"prompt\":1e999}"}) {
    ApiError e = reject(body);
    EXPECT_EQ(e.status, 400) << body;
  }
  std::string deep(100, '[');
  EXPECT_EQ(reject("{\"x\":" + deep + std::string(100, ']') + ",\"prompt\":\"a\"}").status, 400);
  // Brackets inside strings are text, not nesting.
  EXPECT_EQ(
      *api_request_parse("{\"prompt\":\"" + deep + "\\\"{\"}", Endpoint::completions).prompt_text,
      deep + "\"{");
  // 300000 objects in one array: parsed in linear time (the quadratic parse this once was runs
  // for minutes, past the test's timeout), then refused for the field that holds them.
  std::string wide = "{\"prompt\":\"a\",\"stop\":[";
  for (int i = 0; i < 300000; ++i) wide += "{},";
  ApiError e = reject(wide + "{}]}");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "stop") << e.message;
}

TEST(ApiError, OpenAiShape) {
  ApiError e = bad_request("max_tokens", "bad \xff value");
  std::string j = e.to_json();
  EXPECT_NE(j.find(R"("param":"max_tokens")"), std::string::npos) << j;
  EXPECT_NE(j.find(R"("type":"invalid_request_error")"), std::string::npos) << j;
  EXPECT_NE(j.find(R"("code":null)"), std::string::npos) << j;
  EXPECT_EQ(j.find('\xff'), std::string::npos) << "invalid UTF-8 must be replaced";
}

}  // namespace api_request_test
