// `invar tokenize` and `invar chat-format` end to end, through the real binary.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "command_run.h"
#include "test_support.h"

namespace cli_test {

using Result = invar::test::CommandResult;

// `invar ARGS`, stdout and stderr together.
Result run(const std::string& args) {
  return invar::test::command_run(std::string(INVAR_BINARY_DIR) + "/apps/invar/invar " + args +
                                  " 2>&1");
}

const std::string kTokenizer = invar::test::source_path("data/qwen3/tokenizer.json");

TEST(TokenizeCli, TextToIdsAndBack) {
  auto r = run("tokenize " + kTokenizer + " --text 'Hello, world!'");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "9707 11 1879 0\n");
  r = run("tokenize " + kTokenizer + " --decode '9707,11,1879,0'");
  EXPECT_EQ(r.out, "Hello, world!\n");
  r = run("tokenize " + kTokenizer + " --text '<|im_start|>hi' --special --json");
  EXPECT_EQ(r.out, "{\"ids\":[151644,6023],\"n_tokens\":2,\"pieces\":[\"<|im_start|>\",\"hi\"]}\n");
}

TEST(TokenizeCli, ReferenceGgufVocabulary) {
  const auto ref = invar::test::load_reference("qwen35-tiny");
  const auto& c = ref["tokenize"][0];
  const std::string text = c["text"];
  ASSERT_EQ(text.find('\''), std::string::npos);
  std::string want;
  for (const auto& id : c["ids"]) want += (want.empty() ? "" : " ") + std::to_string(id.get<int>());
  const auto r = run("tokenize " + invar::test::data_path("models/qwen35-tiny.gguf") + " --text '" +
                     text + "'");
  EXPECT_EQ(r.out, want + "\n");
}

TEST(TokenizeCli, UsageErrorsExitNonZero) {
  EXPECT_NE(run("tokenize " + kTokenizer).status, 0);
  EXPECT_NE(run("tokenize /nonexistent.json --text x").status, 0);
}

TEST(ChatFormatCli, RendersChatCaseAndRefusesWhatItCannotRender) {
  const auto cases =
      invar::test::load_json(invar::test::data_path("tokenizers/qwen3/chat_cases.json"));
  const auto& c = cases[0];
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("invar_chat_" + std::to_string(::getpid()) + ".json"))
                               .string();
  const std::string qwen3 =
      invar::test::source_path("tests/data/chat-templates/Qwen-Qwen3-0.6B.jinja");
  std::ofstream(path) << nlohmann::json{{"messages", c["messages"]}}.dump();
  auto r = run("chat-format --template " + qwen3 + " --request " + path);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, c["text"].get<std::string>());
  std::ofstream(path)
      << nlohmann::json{{"messages", c["messages"]}, {"add_generation_prompt", false}}.dump();
  r = run("chat-format --template " + qwen3 + " --request " + path);
  EXPECT_EQ(r.out, cases[1]["text"].get<std::string>());
  // A request the template refuses (raise_exception) exits non-zero with the template's message.
  std::ofstream(path) << R"({"messages": []})";
  r = run("chat-format --template " +
          invar::test::source_path("tests/data/chat-templates/Qwen3.5-4B.jinja") + " --request " +
          path);
  std::filesystem::remove(path);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("No messages provided."), std::string::npos) << r.out;
}

}  // namespace cli_test
