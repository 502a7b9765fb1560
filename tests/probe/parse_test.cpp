// The probe parses every response shape it meets in the wild: recorded (hand-written from the
// servers' documented formats) fixtures of OpenAI/vLLM chat, vLLM legacy completions (with and
// without token ids), llama.cpp completions and chat.
#include <gtest/gtest.h>

#include "core/error.h"
#include "probe/completion.h"
#include "probe/plan.h"

namespace invar::probe {
namespace parse_test {

json fixture(const std::string& name) {
  return json::parse(
      read_text_file(std::string(INVAR_SOURCE_DIR) + "/tests/probe/fixtures/" + name));
}

TEST(ProbeParse, OpenAIChatContentShape) {
  Completion c = completion_parse(fixture("openai_chat.json"), Api::chat);
  EXPECT_EQ(c.shape, "content");
  EXPECT_EQ(c.text, "The date");
  ASSERT_EQ(c.tokens.size(), 2u);
  EXPECT_EQ(c.tokens[0].chosen.token, "The");
  EXPECT_EQ(c.tokens[0].chosen.id, -1);
  EXPECT_EQ(c.tokens[0].chosen.logprob, -0.0312);
  ASSERT_EQ(c.tokens[1].top.size(), 3u);
  EXPECT_EQ(c.tokens[1].top[1].token, " invoice");
  // The exact number received, not a float rounding of it.
  EXPECT_EQ(c.tokens[1].top[2].logprob, -2.0000000000000004);
  EXPECT_EQ(c.usage.cached_tokens, 3008);
  EXPECT_EQ(c.usage.prompt_tokens, 3021);
  EXPECT_EQ(c.system_fingerprint, "fp_44709d6fcb");
  EXPECT_EQ(c.finish_reason, "length");
}

TEST(ProbeParse, VllmLegacyCompletionsKeepsServerOrder) {
  Completion c = completion_parse(fixture("vllm_completions.json"), Api::completions);
  EXPECT_EQ(c.shape, "legacy");
  EXPECT_EQ(c.text, " 2026-09-14");
  ASSERT_EQ(c.tokens.size(), 3u);
  EXPECT_EQ(c.tokens[0].chosen.token, " 2026");
  EXPECT_EQ(c.tokens[1].chosen.logprob, -0.0009765625);
  // The object's keys come in the server's order, not sorted: "09" first though "08" is likelier.
  ASSERT_EQ(c.tokens[2].top.size(), 3u);
  EXPECT_EQ(c.tokens[2].top[0].token, "09");
  EXPECT_EQ(c.tokens[2].top[1].token, "08");
  EXPECT_EQ(c.tokens[2].top[1].logprob, -0.75);
  EXPECT_EQ(c.usage.cached_tokens, 1600);
  EXPECT_EQ(c.system_fingerprint, "");
}

TEST(ProbeParse, VllmTokenIdsBecomeIds) {
  Completion c = completion_parse(fixture("vllm_completions_token_ids.json"), Api::completions);
  ASSERT_EQ(c.tokens.size(), 2u);
  EXPECT_EQ(c.tokens[0].chosen.id, 220);
  EXPECT_EQ(c.tokens[0].top[1].id, 17);
  EXPECT_EQ(c.tokens[1].top[1].id, 14);
  EXPECT_FALSE(c.usage.cached_tokens.has_value());  // prompt_tokens_details: null
}

TEST(ProbeParse, LlamaCppCompletionsUseContentShape) {
  Completion c = completion_parse(fixture("llamacpp_completions.json"), Api::completions);
  EXPECT_EQ(c.shape, "content");
  EXPECT_EQ(c.text, " 2026");
  ASSERT_EQ(c.tokens.size(), 2u);
  EXPECT_EQ(c.tokens[0].chosen.id, 220);
  EXPECT_EQ(c.tokens[1].top[1].id, 16);
  EXPECT_EQ(c.tokens[1].top[1].logprob, -4.5);
  EXPECT_EQ(c.usage.cached_tokens, 596);
  EXPECT_EQ(c.system_fingerprint, "b6500-1a2b3c4d");
}

TEST(ProbeParse, LlamaCppChatCachedTokensFromTimings) {
  Completion c = completion_parse(fixture("llamacpp_chat.json"), Api::chat);
  ASSERT_EQ(c.tokens.size(), 1u);
  EXPECT_EQ(c.tokens[0].chosen.id, 90);
  EXPECT_EQ(c.tokens[0].top[2].token, "```");
  EXPECT_EQ(c.usage.cached_tokens, 84);  // no prompt_tokens_details: timings.cache_n
}

TEST(ProbeParse, NothingGeneratedNeedsNoLogprobs) {
  Completion c = completion_parse(fixture("llamacpp_chat_empty.json"), Api::chat);
  EXPECT_TRUE(c.tokens.empty());
  EXPECT_EQ(c.text, "");
}

TEST(ProbeParse, ErrorsNameTheField) {
  try {
    completion_parse(fixture("no_logprobs_chat.json"), Api::chat);
    FAIL() << "a response without logprobs must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("choices[0].logprobs"), std::string::npos) << e.what();
  }
  // A chat body read as completions names the missing field.
  EXPECT_THROW(completion_parse(fixture("openai_chat.json"), Api::completions), Error);
  json bad = fixture("openai_chat.json");
  bad["choices"][0]["logprobs"]["content"][1]["top_logprobs"][0].erase("logprob");
  try {
    completion_parse(bad, Api::chat);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("content[1].top_logprobs[0].logprob"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(completion_parse(json{{"error", {{"message", "model not found"}}}}, Api::chat),
               Error);
}

TEST(ProbeParse, RecordRoundTripIsExact) {
  Completion c = completion_parse(fixture("vllm_completions.json"), Api::completions);
  Completion d = completion_from_json(json::parse(completion_to_json(c).dump()));
  ASSERT_EQ(d.tokens.size(), c.tokens.size());
  for (size_t i = 0; i < c.tokens.size(); i++) {
    EXPECT_EQ(d.tokens[i].chosen.logprob, c.tokens[i].chosen.logprob);
    ASSERT_EQ(d.tokens[i].top.size(), c.tokens[i].top.size());
    for (size_t k = 0; k < c.tokens[i].top.size(); k++) {
      EXPECT_EQ(d.tokens[i].top[k].token, c.tokens[i].top[k].token);
      EXPECT_EQ(d.tokens[i].top[k].logprob, c.tokens[i].top[k].logprob);
    }
  }
  EXPECT_EQ(d.usage.cached_tokens, c.usage.cached_tokens);
}

}  // namespace parse_test
}  // namespace invar::probe
