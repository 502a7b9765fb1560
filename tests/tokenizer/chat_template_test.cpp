// Template recognition and the refusals: what invar cannot render exactly is an Error.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "test_support.h"

namespace invar {
namespace {

TEST(ChatTemplate, EmbeddedQwen3TextIsThePublishedOne) {
  const auto cfg = test::load_json(test::source_path("data/qwen3/tokenizer_config.json"));
  EXPECT_EQ(std::string(chat_template_qwen3_text()), cfg["chat_template"].get<std::string>());
  EXPECT_EQ(chat_template_identify(cfg["chat_template"].get<std::string>()), ChatTemplate::qwen3);
}

TEST(ChatTemplate, UnknownOrMissingTemplatesAreRefused) {
  std::string almost(chat_template_qwen3_text());
  almost.back() = ' ';
  for (const std::string& t : {almost, std::string(), std::string("{{ messages }}")}) {
    try {
      chat_template_identify(t);
      FAIL() << "accepted " << t.size() << " bytes";
    } catch (const Error& e) {
      EXPECT_TRUE(std::string(e.what()).find("cannot render exactly") != std::string::npos ||
                  std::string(e.what()).find("no chat template") != std::string::npos)
          << e.what();
    }
  }
}

TEST(ChatTemplate, RolesTheTemplateWouldDropAreRefused) {
  EXPECT_THROW(chat_render({{"developer", "x"}}, true), Error);
  EXPECT_THROW(chat_render({}, true), Error);
  EXPECT_EQ(chat_render(ChatTemplate::chatml, {{"developer", "x"}}, {}),
            "<|im_start|>developer\nx<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, ThinkingBranches) {
  // An assistant turn before the last user query loses its reasoning; one after it keeps it.
  const std::vector<ChatMessage> m = {{"user", "q1"},
                                      {"assistant", "<think>\nr1\n</think>\n\na1"},
                                      {"user", "q2"},
                                      {"assistant", "\n\na2"}};
  EXPECT_EQ(chat_render(m, false),
            "<|im_start|>user\nq1<|im_end|>\n<|im_start|>assistant\na1<|im_end|>\n"
            "<|im_start|>user\nq2<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\na2<|im_end|>\n");
  // A non-first system message is an ordinary turn; tool results are wrapped as user turns.
  const std::vector<ChatMessage> t = {
      {"user", "q"}, {"system", "s"}, {"tool", "r1"}, {"tool", "r2"}};
  EXPECT_EQ(chat_render(t, true),
            "<|im_start|>user\nq<|im_end|>\n<|im_start|>system\ns<|im_end|>\n"
            "<|im_start|>user\n<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n"
            "</tool_response><|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, MessagesJson) {
  const auto m =
      chat_messages_from_json(R"({"model":"x","messages":[{"role":"user","content":"hi"}]})");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].role, "user");
  EXPECT_EQ(m[0].content, "hi");
  EXPECT_THROW(
      chat_messages_from_json(R"([{"role":"user","content":[{"type":"text","text":"hi"}]}])"),
      Error);
  EXPECT_THROW(
      chat_messages_from_json(R"([{"role":"assistant","content":"a","reasoning_content":"r"}])"),
      Error);
  EXPECT_THROW(chat_messages_from_json(R"({"messages":[],"tools":[{"type":"function"}]})"), Error);
  EXPECT_THROW(chat_messages_from_json("[{"), Error);
}

}  // namespace
}  // namespace invar
