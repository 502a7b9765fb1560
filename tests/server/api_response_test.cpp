// Response shapes as OpenAI clients parse them: both logprobs shapes, usage always with
// cached_tokens, stream chunks, and exact float printing.
#include "server/api_response.h"

#include <gtest/gtest.h>

#include <cstring>

#include "server/fingerprint.h"

namespace api_response_test {

using namespace invar::server;

namespace {

ResponseContext context(Endpoint ep) {
  ResponseContext c;
  c.endpoint = ep;
  c.id = "x-1";
  c.created = 7;
  c.model = "m";
  c.fingerprint = "fp_1";
  c.logprobs = true;
  c.top_logprobs = 2;
  c.token_bytes = [](int32_t id) {
    return id == 9 ? std::string("\xE2\x82") : std::string(1, char('a' + id));
  };
  return c;
}

std::vector<TokenOut> tokens() {
  return {{0, -0.25f, {{0, -0.25f}, {1, -1.5f}, {2, -3.0f}}}, {9, -0.1f, {{9, -0.1f}, {0, -2.0f}}}};
}

}  // namespace

TEST(ApiResponse, ChatLogprobsShape) {
  ResponseContext c = context(Endpoint::chat);
  json lp = logprobs_chat_json(c, tokens());
  ASSERT_EQ(lp["content"].size(), 2u);
  const json& e0 = lp["content"][0];
  EXPECT_EQ(e0["token"], "a");
  EXPECT_EQ(e0["logprob"].get<double>(), -0.25);
  EXPECT_EQ(e0["bytes"], json::array({97}));
  ASSERT_EQ(e0["top_logprobs"].size(), 2u);  // top_logprobs = 2 of the 3 candidates
  EXPECT_EQ(e0["top_logprobs"][1]["token"], "b");
  // A token that is half a character: text has U+FFFD, bytes are exact.
  EXPECT_EQ(lp["content"][1]["token"], "\xEF\xBF\xBD");
  EXPECT_EQ(lp["content"][1]["bytes"], json::array({0xE2, 0x82}));
}

TEST(ApiResponse, LegacyLogprobsShape) {
  ResponseContext c = context(Endpoint::completions);
  int64_t end = 0;
  json lp = logprobs_legacy_json(c, tokens(), 5, &end);
  EXPECT_EQ(lp["tokens"], json::array({"a", "\xEF\xBF\xBD"}));
  EXPECT_EQ(lp["token_logprobs"][1].get<double>(), double(-0.1f));
  EXPECT_EQ(lp["top_logprobs"][0], json({{"a", -0.25}, {"b", -1.5}}));
  EXPECT_EQ(lp["text_offset"], json::array({5, 6}));
  EXPECT_EQ(end, 8);
  c.tokens_as_ids = true;
  EXPECT_EQ(logprobs_legacy_json(c, tokens(), 0, nullptr)["tokens"][1], "token_id:9");
}

TEST(ApiResponse, FloatsPrintExactly) {
  // The printed number parses back to the same float bits.
  ResponseContext c = context(Endpoint::chat);
  float v = -1.234567890123f;
  std::string s = json_text(logprobs_chat_json(c, {{0, v, {}}}));
  json back = json::parse(s);
  float r = float(back["content"][0]["logprob"].get<double>());
  EXPECT_EQ(std::memcmp(&r, &v, sizeof v), 0) << s;
}

TEST(ApiResponse, WholeAndChunkShapes) {
  ResponseContext c = context(Endpoint::chat);
  json r = response_json(c, "hi", nullptr, "stop", {5, 3, 2}, nullptr);
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["system_fingerprint"], "fp_1");
  EXPECT_EQ(r["choices"][0]["message"]["content"], "hi");
  EXPECT_EQ(r["usage"]["total_tokens"], 7);
  EXPECT_EQ(r["usage"]["prompt_tokens_details"]["cached_tokens"], 3);
  json first = chunk_json(c, "", nullptr, "", true);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  json last = chunk_json(c, "", nullptr, "length", false);
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  json u = usage_chunk_json(c, {5, 0, 2});
  EXPECT_EQ(u["choices"], json::array());
  EXPECT_EQ(u["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  c.endpoint = Endpoint::completions;
  EXPECT_EQ(response_json(c, "t", nullptr, "stop", {}, nullptr)["choices"][0]["text"], "t");
  EXPECT_EQ(sse_event(json{{"a", 1}}), "data: {\"a\":1}\n\n");
}

TEST(Fingerprint, DependsOnModelAndNumerics) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string a = system_fingerprint_of("00", "v1");
  EXPECT_EQ(a.size(), 19u);
  EXPECT_EQ(a.rfind("fp_", 0), 0u);
  EXPECT_NE(a, system_fingerprint_of("01", "v1"));
  EXPECT_NE(a, system_fingerprint_of("00", "v2"));
  EXPECT_EQ(a, system_fingerprint_of("00", "v1"));
}

}  // namespace api_response_test
