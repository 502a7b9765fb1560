// `invar chat-format` end to end through the real binary: the prompt printed exactly (compared
// with Python's jinja2 rendering the same request), --json, --model, bos/eos, --now, and
// exit status 1 with the message for raise_exception() and template errors.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "command_run.h"

namespace chat_format_cli_test {

namespace fs = std::filesystem;

using Result = invar::test::CommandResult;

Result run(const std::string& cmd_line, bool with_stderr = true) {
  return invar::test::command_run(cmd_line + (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

Result invar(const std::string& args, bool with_stderr = true) {
  return run(std::string(INVAR_BINARY_DIR) + "/apps/invar/invar chat-format " + args, with_stderr);
}

const std::string kSrc = INVAR_SOURCE_DIR;
const std::string kTemplates = kSrc + "/tests/data/chat-templates/";
const std::string kRequests = kSrc + "/tests/chat/requests/";

class TempDir {
 public:
  TempDir() : dir_(fs::temp_directory_path() / ("invar_chatfmt_" + std::to_string(::getpid()))) {
    fs::create_directories(dir_);
  }
  ~TempDir() { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

 private:
  fs::path dir_;
};

// jinja2's rendering of one template x request (tests/chat/jinja2_reference.py).
nlohmann::json jinja2_render(const TempDir& tmp, const std::string& tmpl, const std::string& req,
                             const std::string& bos, const std::string& eos) {
  const nlohmann::json plan = {{"cases",
                                {{{"template", tmpl},
                                  {"request", req},
                                  {"bos", bos},
                                  {"eos", eos},
                                  {"now", "2026-03-14T15:09:26"}}}}};
  const std::string plan_path = tmp.write("plan.json", plan.dump());
  const std::string out_path = tmp.path("out.json");
  const Result r = run(std::string(INVAR_PYTHON3) + " " + kSrc +
                       "/tests/chat/jinja2_reference.py " + plan_path + " " + out_path);
  EXPECT_EQ(r.status, 0) << r.out;
  std::ifstream f(out_path);
  std::stringstream ss;
  ss << f.rdbuf();
  return nlohmann::json::parse(ss.str())["results"][0];
}

TEST(ChatFormatCli, PrintsExactlyWhatJinja2Renders) {
  TempDir tmp;
  for (const char* req : {"parallel_tool_calls.json", "reasoning_history.json", "unicode.json"}) {
    const std::string tmpl = kTemplates + "Qwen3.5-4B.jinja";
    const auto want = jinja2_render(tmp, tmpl, kRequests + req, "", "");
    ASSERT_TRUE(want["ok"].get<bool>()) << want;
    const Result r =
        invar("--template " + tmpl + " --request " + kRequests + req + " --now 2026-03-14T15:09:26",
              false);
    EXPECT_EQ(r.status, 0) << req;
    EXPECT_EQ(r.out, want["text"].get<std::string>()) << req;  // nothing added, no newline
    const Result j =
        invar("--template " + tmpl + " --request " + kRequests + req + " --json", false);
    EXPECT_EQ(j.status, 0);
    EXPECT_EQ(nlohmann::json::parse(j.out)["prompt"], want["text"]) << req;
  }
}

TEST(ChatFormatCli, BosEosNowAndArgumentStrings) {
  TempDir tmp;
  const std::string tmpl =
      tmp.write("t.jinja",
                "{{ bos_token }}|{{ eos_token }}|{{ strftime_now('%d %b %Y') }}|"
                "{{ messages[0].tool_calls[0].function.arguments.city }}|{{ enable_thinking }}|"
                "{{ add_generation_prompt }}");
  const std::string req =
      tmp.write("r.json",
                R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c1",
          "type": "function", "function": {"name": "w", "arguments": "{\"city\": \"Paris\"}"}}]}],
          "chat_template_kwargs": {"enable_thinking": false}, "add_generation_prompt": false})");
  Result r = invar("--template " + tmpl + " --request " + req +
                   " --bos-token '<s>' --eos-token '</s>' --now 2026-01-02T03:04:05");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "<s>|</s>|02 Jan 2026|Paris|False|False");
  r = invar("--template " + tmpl + " --request " + req + " --now 2026-12-31");
  EXPECT_EQ(r.out, "||31 Dec 2026|Paris|False|False");  // a bare template: empty bos/eos
}

TEST(ChatFormatCli, ModelCarriesItsTemplate) {
  TempDir tmp;
  const std::string req =
      tmp.write("r.json", R"({"messages": [{"role": "user", "content": "Hi"}]})");
  const Result r =
      invar("--model " + kSrc + "/tests/data/models/qwen35-tiny.gguf --request " + req);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatFormatCli, TemplateErrorsExitOneWithTheMessage) {
  TempDir tmp;
  const std::string empty = tmp.write("e.json", R"({"messages": []})");
  Result r = invar("--template " + kTemplates + "Qwen3.5-4B.jinja --request " + empty);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("No messages provided."), std::string::npos) << r.out;
  const std::string bad =
      tmp.write("bad.jinja", "ok\n{% for x in messages %}{{ x.content + 1 }}{% endfor %}");
  const std::string one =
      tmp.write("one.json", R"({"messages": [{"role": "user", "content": "a"}]})");
  r = invar("--template " + bad + " --request " + one);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("line 2, column"), std::string::npos) << r.out;
  const std::string syntax = tmp.write("syntax.jinja", "{% if %}");
  r = invar("--template " + syntax + " --request " + one);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("line 1"), std::string::npos) << r.out;
}

TEST(ChatFormatCli, UsageErrors) {
  TempDir tmp;
  const std::string one =
      tmp.write("one.json", R"({"messages": [{"role": "user", "content": "a"}]})");
  EXPECT_NE(invar("--request " + one).status, 0);  // neither --model nor --template
  EXPECT_NE(invar("--template a.jinja --model b.gguf --request " + one).status, 0);
  EXPECT_NE(invar("--template " + kTemplates + "Qwen3.5-4B.jinja").status, 0);  // no request
  const std::string bad = tmp.write("bad.json", R"({"messages": "nope"})");
  const Result r = invar("--template " + kTemplates + "Qwen3.5-4B.jinja --request " + bad);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("'messages' must be an array"), std::string::npos) << r.out;
}

}  // namespace chat_format_cli_test
