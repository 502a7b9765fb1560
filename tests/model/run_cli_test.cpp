// `invar run` end to end: the digest is the same whatever --threads, --simd and --chunk say,
// --json is one valid object carrying the same digest, `invar serve` answers the same chat
// request with the same digest (docs/digest.md), and bad input is a clear error.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "../server/serve_process.h"
#include "core/simd.h"
#include "probe/completion.h"
#include "probe/digest.h"

namespace {

const std::string kInvar = std::string(INVAR_BINARY_DIR) + "/apps/invar/invar";
const std::string kModel = std::string(INVAR_TEST_DATA_DIR) + "/models/qwen35-tiny.gguf";

struct Result {
  int status;
  std::string out;
};

Result run(const std::string& args) {
  std::string cmd = kInvar + " run " + kModel + " " + args + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, ""};
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

std::string digest_line(const std::string& out) {
  auto pos = out.rfind("digest ");
  return pos == std::string::npos ? "" : out.substr(pos + 7, 64);
}

TEST(RunCli, DigestIndependentOfThreadsSimdChunk) {
  const std::string base = "--prompt 'The quick brown fox jumps over the lazy dog' -n 12";
  Result a = run(base);
  ASSERT_EQ(a.status, 0) << a.out;
  const std::string d = digest_line(a.out);
  ASSERT_EQ(d.size(), 64u) << a.out;
  std::vector<std::string> variants = {"--threads 2", "--chunk 3", "--chunk 1 --threads 2",
                                       "--simd off"};
  if (invar::simd_detect() >= invar::SimdLevel::avx2) variants.push_back("--simd avx2");
  if (invar::simd_detect() >= invar::SimdLevel::avx512) variants.push_back("--simd avx512");
  for (const std::string& v : variants) {
    Result r = run(base + " " + v);
    ASSERT_EQ(r.status, 0) << v << "\n" << r.out;
    EXPECT_EQ(digest_line(r.out), d) << v;
  }
  // A different prompt gives a different digest (the digest depends on the run).
  Result other = run("--prompt 'The quick brown fox jumps over the lazy cat' -n 12");
  EXPECT_NE(digest_line(other.out), d);
}

TEST(RunCli, JsonObject) {
  Result t = run("--tokens 399,88,86,105 -n 5 --top-logprobs 3 --prompt-logprobs 2 --json");
  ASSERT_EQ(t.status, 0) << t.out;
  nlohmann::json j = nlohmann::json::parse(t.out);
  EXPECT_EQ(j["prompt_tokens"], nlohmann::json({399, 88, 86, 105}));
  ASSERT_EQ(j["prompt_logprobs"].size(), 3u);
  EXPECT_EQ(j["prompt_logprobs"][0][0]["id"], 88);  // the prompt token first, then the top 2
  EXPECT_EQ(j["prompt_logprobs"][0].size(), 3u);
  ASSERT_EQ(j["tokens"].size(), 5u);
  for (const auto& tok : j["tokens"]) {
    ASSERT_EQ(tok["top_logprobs"].size(), 3u);
    EXPECT_EQ(tok["id"], tok["top_logprobs"][0]["id"]);  // greedy
    EXPECT_LE(tok["logprob"].get<double>(), 0.0);
  }
  EXPECT_EQ(j["digest"].get<std::string>().size(), 64u);
  Result plain = run("--tokens 399,88,86,105 -n 5");
  EXPECT_EQ(digest_line(plain.out), j["digest"].get<std::string>());
}

// One engine code path: the CLI and the real server (real HTTP) give the same tokens, logprobs
// and candidates, so the same digest — computed for the server by the probe's own parser.
TEST(RunCli, DigestMatchesServe) {
  const std::string prompt = "Name three colours of the rainbow";
  Result r = run("--chat --prompt '" + prompt + "' -n 12 --threads 2 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_FALSE(j["tokens"].empty());

  using namespace invar::server::testing;
  ServeProcess s({"--model", kModel, "--threads", "1"}, "run_cli_serve");
  ASSERT_NE(s.port(), 0) << s.log();
  const nlohmann::json body = {{"messages", {{{"role", "user"}, {"content", prompt}}}},
                               {"max_tokens", 12},
                               {"temperature", 0},
                               {"logprobs", true},
                               {"top_logprobs", 20}};
  const CurlResult c = curl("-H 'Content-Type: application/json' -d " + shell_quote(body.dump()) +
                            " " + s.url() + "/v1/chat/completions");
  ASSERT_EQ(c.status, 200) << c.body;
  const auto got =
      invar::probe::completion_parse(invar::probe::json::parse(c.body), invar::probe::Api::chat);
  ASSERT_EQ(got.tokens.size(), j["tokens"].size()) << c.body;
  for (size_t i = 0; i < got.tokens.size(); ++i) {
    EXPECT_EQ(got.tokens[i].chosen.id, j["tokens"][i]["id"].get<int64_t>()) << "token " << i;
    EXPECT_EQ(got.tokens[i].top.size(), 20u);
  }
  EXPECT_EQ(invar::probe::completion_digests(got).order, j["digest"].get<std::string>());
}

// `--activations q8` (docs/numerics.md, "The q8 profile"): an unknown value is an error, and a
// q8 server's system_fingerprint is not the f32 server's (it never claims the f32 bits).
TEST(RunCli, ActivationsProfileFlag) {
  EXPECT_EQ(run("--prompt hi -n 1 --activations q9").status, 2);
  EXPECT_EQ(run("--prompt hi -n 1 --activations q8").status, 0);
  using namespace invar::server::testing;
  std::string fp[2];
  for (int i = 0; i < 2; ++i) {
    ServeProcess s({"--model", kModel, "--threads", "1", "--activations", i ? "q8" : "f32"},
                   i ? "run_cli_serve_q8" : "run_cli_serve_f32");
    ASSERT_NE(s.port(), 0) << s.log();
    const nlohmann::json body = {{"prompt", "hi"}, {"max_tokens", 1}, {"temperature", 0}};
    const CurlResult c = curl("-H 'Content-Type: application/json' -d " + shell_quote(body.dump()) +
                              " " + s.url() + "/v1/completions");
    ASSERT_EQ(c.status, 200) << c.body;
    fp[i] = nlohmann::json::parse(c.body)["system_fingerprint"].get<std::string>();
  }
  EXPECT_FALSE(fp[0].empty());
  EXPECT_NE(fp[0], fp[1]);
}

TEST(RunCli, BadInputIsAnError) {
  EXPECT_EQ(run("--tokens 5,99999 -n 1").status, 2);
  EXPECT_EQ(run("--tokens 5,x -n 1").status, 2);
  EXPECT_EQ(run("-n 1").status, 2);  // neither --prompt nor --tokens
  EXPECT_EQ(run("--prompt hi --simd neon").status, 2);
}

}  // namespace
