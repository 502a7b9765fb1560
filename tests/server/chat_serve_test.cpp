// `invar serve` renders the model's own chat template. A copy of the tiny qwen35 model is given
// the Qwen3.5 template (then the Qwen3 one, the default model's) as its tokenizer.chat_template;
// the prompt the server builds for chat requests with tools, tool calls, tool loops with null
// content, text-part arrays and reasoning (read back through /tokenize and /detokenize) must
// equal Python jinja2's rendering of the same request, text and tokens. Also: the startup
// log names the template and its digest, --chat-template overrides it, a model without a
// template refuses chat requests with a 400 (completions still work), and /tokenize,
// /detokenize follow the peers' shapes (no "model": llama-server's {"content"}) and the API key.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/sha256.h"
#include "gguf/gguf.h"
#include "gguf/gguf_test_util.h"
#include "serve_process.h"

namespace chat_serve_test {

using namespace invar::server::testing;
using json = nlohmann::ordered_json;

namespace {

const std::string kSource = INVAR_SOURCE_DIR;
const std::string kQwen35Template = kSource + "/tests/data/chat-templates/Qwen3.5-4B.jinja";
const std::string kQwen3Template = kSource + "/tests/data/chat-templates/Qwen-Qwen3-0.6B.jinja";

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The tiny qwen35 model with `tmpl` as its chat template ("" leaves it without one).
std::string model_with_template(const std::string& name, const std::string& tmpl) {
  const std::string path = invar::test::temp_path(name + ".gguf");
  auto src = invar::GgufFile::open(std::string(INVAR_TEST_DATA_DIR) + "/models/qwen35-tiny.gguf");
  invar::test::rewrite(*src, path, {"tokenizer.chat_template"}, {}, [&](invar::GgufWriter& w) {
    if (!tmpl.empty()) w.set_string("tokenizer.chat_template", tmpl);
  });
  return path;
}

CurlResult post(const ServeProcess& s, const std::string& path, const json& body,
                const std::string& key = "") {
  std::string auth = key.empty() ? "" : "-H " + shell_quote("Authorization: Bearer " + key) + " ";
  return curl(auth + "-H 'Content-Type: application/json' -d " + shell_quote(body.dump()) + " " +
              s.url() + path);
}

// jinja2's renderings of `requests` with a template, content fitted to the format vLLM detects
// (tests/chat/jinja2_reference.py).
std::vector<std::string> jinja2_render(const std::string& tmpl,
                                       const std::vector<std::string>& requests) {
  const std::string dir = invar::test::temp_path("jinja2");
  std::filesystem::create_directories(dir);
  json plan = {{"cases", json::array()}};
  for (const auto& r : requests)
    plan["cases"].push_back({{"template", tmpl},
                             {"request", r},
                             {"bos", ""},
                             {"eos", "<|endoftext|>"},
                             {"now", "2026-01-01T00:00:00"}});
  std::ofstream(dir + "/plan.json") << plan.dump();
  const std::string cmd = std::string(INVAR_PYTHON3) + " " + kSource +
                          "/tests/chat/jinja2_reference.py " + dir + "/plan.json " + dir +
                          "/out.json";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "jinja2 did not run (python3-jinja2)";
  std::vector<std::string> out;
  const json results = json::parse(read_text(dir + "/out.json"));
  for (const auto& r : results["results"]) {
    EXPECT_TRUE(r["ok"].get<bool>()) << r.dump();
    out.push_back(r["ok"].get<bool>() ? r["text"].get<std::string>() : "");
  }
  std::filesystem::remove_all(dir);
  return out;
}

// `invar tokenize` of text with special tokens parsed: what the prompt's tokens must be.
std::vector<int32_t> tokenize_special(const std::string& model, const std::string& text) {
  const std::string file = invar::test::temp_path("text.txt");
  std::ofstream(file, std::ios::binary) << text;
  FILE* p = popen((kInvarBin + " tokenize " + shell_quote(model) + " --json --special --file " +
                   shell_quote(file))
                      .c_str(),
                  "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0) << out;
  return json::parse(out)["ids"].get<std::vector<int32_t>>();
}

// Requests of the jinja2 corpus the tiny vocabulary can encode (it has no token for some
// non-ASCII bytes): tools, calls with object arguments, reasoning, and the tool loops clients
// send (content null beside tool_calls, text-part arrays, the content key left out).
const std::vector<std::string> kServedRequests = {
    "tools_offered",        "tool_call_object_args",
    "tools_with_system",    "reasoning_history",
    "thinking_off",         "multi_step_tools_pending",
    "content_parts",        "content_parts_single",
    "content_mixed_null",   "tool_loop_null_content",
    "tool_loop_third_turn", "tool_loop_no_tools",
    "tool_loop_parts",      "tool_loop_no_content_key"};

// For each request: the server's prompt (text and tokens) is jinja2's rendering, and a chat
// completion is fed exactly those tokens. Returns jinja2's renderings.
std::vector<std::string> expect_prompts_are_jinja2s(const ServeProcess& s, const std::string& model,
                                                    const std::string& tmpl) {
  std::vector<std::string> files;
  for (const auto& n : kServedRequests)
    files.push_back(kSource + "/tests/chat/requests/" + n + ".json");
  const std::vector<std::string> want = jinja2_render(tmpl, files);
  EXPECT_EQ(want.size(), kServedRequests.size());
  if (want.size() != kServedRequests.size()) return want;
  for (size_t i = 0; i < kServedRequests.size(); ++i) {
    const std::string& name = kServedRequests[i];
    const json req = json::parse(read_text(files[i]));
    const CurlResult tk = post(s, "/tokenize", req, "k");
    EXPECT_EQ(tk.status, 200) << name << ": " << tk.body;
    if (tk.status != 200) continue;
    const json t = json::parse(tk.body);
    const auto tokens = t["tokens"].get<std::vector<int32_t>>();
    EXPECT_EQ(t["count"].get<size_t>(), tokens.size());
    EXPECT_GT(t["max_model_len"].get<int64_t>(), 0);
    const CurlResult dt = post(s, "/detokenize", {{"tokens", tokens}}, "k");
    EXPECT_EQ(dt.status, 200) << dt.body;
    EXPECT_EQ(json::parse(dt.body)["content"].get<std::string>(), want[i]) << name;
    EXPECT_EQ(tokens, tokenize_special(model, want[i])) << name << ": token by token";
    json chat = req;
    chat["max_tokens"] = 1;
    const CurlResult c = post(s, "/v1/chat/completions", chat, "k");
    EXPECT_EQ(c.status, 200) << name << ": " << c.body;
    if (c.status == 200) {
      EXPECT_EQ(json::parse(c.body)["usage"]["prompt_tokens"].get<size_t>(), tokens.size());
    }
  }
  return want;
}

size_t request_index(const std::string& name) {
  return size_t(std::find(kServedRequests.begin(), kServedRequests.end(), name) -
                kServedRequests.begin());
}

TEST(ChatServe, PromptEqualsJinja2RenderingOfTheModelsTemplate) {
  const std::string tmpl = read_text(kQwen35Template);
  const std::string model = model_with_template("qwen35_tmpl", tmpl);
  ServeProcess s({"--model", model, "--threads", "1", "--api-key", "k"}, "chat_serve_own");
  ASSERT_NE(s.port(), 0) << s.log();
  // The startup log names the template's origin and digest, and the content format detected.
  EXPECT_NE(s.log().find("chat template: the model's tokenizer.chat_template (sha256 " +
                         invar::sha256_hex(tmpl).substr(0, 12)),
            std::string::npos)
      << s.log();
  EXPECT_NE(s.log().find("content format: openai (detected)"), std::string::npos) << s.log();

  const std::vector<std::string> want = expect_prompts_are_jinja2s(s, model, kQwen35Template);
  ASSERT_EQ(want.size(), kServedRequests.size());
  // A tools request renders the Qwen3.5 tool section (the check is not vacuous).
  EXPECT_NE(want[0].find("<function=example_function_name>"), std::string::npos);

  // Same auth as /v1; vLLM's shapes and errors.
  EXPECT_EQ(post(s, "/tokenize", {{"prompt", "hi"}}).status, 401);
  const json strs = json::parse(
      post(s, "/tokenize", {{"prompt", "hi<|im_end|>"}, {"return_token_strs", true}}, "k").body);
  EXPECT_EQ(strs["token_strs"].back(), "<|im_end|>");
  EXPECT_EQ(post(s, "/tokenize", {{"prompt", "x"}, {"model", "nope"}}, "k").status, 404);
  EXPECT_EQ(post(s, "/tokenize", {{"prompt", "x"}, {"messages", json::array()}}, "k").status, 400);
  EXPECT_EQ(post(s, "/detokenize", {{"tokens", {1, -1}}}, "k").status, 400);
  const CurlResult bad = post(s, "/tokenize", {{"messages", {{{"role", "wizard"}}}}}, "k");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("messages[0].role"), std::string::npos) << bad.body;
  // A template's raise_exception is the client's 400, with the template's message. (A
  // developer message is rendered as system, which Qwen3.5 takes only at the beginning.)
  for (const char* role : {"system", "developer"}) {
    const CurlResult raised = post(
        s, "/v1/chat/completions",
        {{"messages", {{{"role", "user"}, {"content", "x"}}, {{"role", role}, {"content", "y"}}}},
         {"max_tokens", 1}},
        "k");
    EXPECT_EQ(raised.status, 400) << raised.body;
    EXPECT_NE(raised.body.find("System message must be at the beginning"), std::string::npos)
        << raised.body;
  }
}

// The Qwen3 template (the default model's) uses content as a string: null content and part
// arrays reach it as vLLM fits them ("" and the parts joined), where jinja2 on the raw request
// fails ("argument of type 'NoneType' is not iterable", "'list object' has no attribute").
TEST(ChatServe, PromptEqualsJinja2RenderingOfTheQwen3Template) {
  const std::string model = model_with_template("qwen3_tmpl", read_text(kQwen3Template));
  ServeProcess s({"--model", model, "--threads", "1", "--api-key", "k"}, "chat_serve_qwen3");
  ASSERT_NE(s.port(), 0) << s.log();
  EXPECT_NE(s.log().find("content format: string (detected)"), std::string::npos) << s.log();
  const std::vector<std::string> want = expect_prompts_are_jinja2s(s, model, kQwen3Template);
  ASSERT_EQ(want.size(), kServedRequests.size());
  // The tool-call turn sent with content null renders its call, and "None" nowhere.
  const std::string& loop = want[request_index("tool_loop_null_content")];
  EXPECT_NE(loop.find("<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\""),
            std::string::npos)
      << loop;
  EXPECT_EQ(loop.find("None"), std::string::npos) << loop;
  // Parts joined by a newline.
  EXPECT_NE(want[request_index("content_parts")].find("Describe this.\nSecond paragraph."),
            std::string::npos);
}

TEST(ChatServe, ChatTemplateFlagOverridesAndNoTemplateRefusesChat) {
  const std::string bare = model_with_template("qwen35_bare", "");
  ServeProcess none({"--model", bare, "--threads", "1"}, "chat_serve_none");
  ServeProcess flag({"--model", bare, "--threads", "1", "--chat-template", kQwen35Template},
                    "chat_serve_flag");
  ASSERT_NE(none.port(), 0) << none.log();
  ASSERT_NE(flag.port(), 0) << flag.log();
  EXPECT_NE(none.log().find("chat template: none"), std::string::npos) << none.log();
  EXPECT_NE(flag.log().find("chat template: --chat-template " + kQwen35Template), std::string::npos)
      << flag.log();

  const json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 1}};
  const CurlResult refused = post(none, "/v1/chat/completions", chat);
  EXPECT_EQ(refused.status, 400);
  EXPECT_NE(refused.body.find("--chat-template"), std::string::npos) << refused.body;
  EXPECT_EQ(post(none, "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 1}}).status, 200);

  const CurlResult ok = post(flag, "/tokenize", {{"messages", chat["messages"]}});
  ASSERT_EQ(ok.status, 200) << ok.body;
  const json t = json::parse(ok.body);
  const CurlResult text = post(flag, "/detokenize", {{"tokens", t["tokens"]}});
  EXPECT_EQ(json::parse(text.body)["content"],
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n");
}

}  // namespace

}  // namespace chat_serve_test
