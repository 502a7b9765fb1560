// vLLM's and llama-server's command lines on the real `invar serve` (apps/invar/peer_flags.h):
// each flag of the peers' usual lines, a few command lines at one server start each, reaches
// /health with one log line per flag saying what invar does, and the renamed ones reach invar's
// flag (read back from /props and /v1/models); the values invar cannot honour, -hf, and a
// context past the model's trained one are refused before the server starts, naming why.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "command_run.h"
#include "serve_process.h"

namespace peer_flags_serve_test {

using namespace invar::server::testing;
using json = nlohmann::json;

namespace {

json get_json(const ServeProcess& s, const std::string& path) {
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(60, 0);
  auto r = c.Get(path.c_str());
  EXPECT_TRUE(r && r->status == 200) << path << ": " << (r ? r->body : "no answer");
  return r && r->status == 200 ? json::parse(r->body) : json();
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// The trained context of the tiny model, as `invar serve` refuses past it.
int64_t tiny_context() {
  const auto r =
      invar::test::command_run(kInvarBin + " serve -m " + kTinyModel + " --port 0 -c 1T 2>&1");
  const size_t p = r.out.find("exceeds the ");
  return p == std::string::npos ? 0 : std::atoll(r.out.c_str() + p + 12);
}

struct Group {
  std::vector<std::string> args;
  std::vector<std::string> noted;  // each must start exactly one log line "invar serve: <it> ("
  int64_t ctx;
  std::string model_id;
};

TEST(PeerFlagsServe, PeersCommandLinesStartWithOneLineEach) {
  const int64_t trained = tiny_context();
  ASSERT_GT(trained, 1024) << "the refusal of -c 1T did not name the model's context";
  const std::string past = std::to_string(trained + 4);
  const std::vector<Group> groups = {
      {{"--model", kTinyModel, "--enable-prefix-caching", "--enable-auto-tool-choice",
        "--reasoning-parser", "qwen3", "--max-num-batched-tokens", "1k", "--tensor-parallel-size",
        "1", "--gpu-memory-utilization", "0.9", "--dtype", "auto", "--trust-remote-code",
        "--disable-log-requests", "--max-model-len", "2k"},
       {"--enable-prefix-caching", "--enable-auto-tool-choice", "--reasoning-parser qwen3",
        "--max-num-batched-tokens 1k", "--tensor-parallel-size 1", "--gpu-memory-utilization 0.9",
        "--dtype auto", "--trust-remote-code", "--disable-log-requests"},
       2000,
       "qwen3next-tiny"},
      {{"-m",
        kTinyModel,
        "--jinja",
        "-ngl",
        "99",
        "--mlock",
        "--cont-batching",
        "--no-webui",
        "-fa",
        "on",
        "-ub",
        "512",
        "--cache-reuse",
        "256",
        "-t",
        "1",
        "--alias",
        "tiny-alias",
        "--metrics",
        "--reasoning-format",
        "deepseek",
        "-c",
        "1K"},
       {"--jinja", "-ngl 99", "--mlock", "--cont-batching", "--no-webui", "-fa on", "-ub 512",
        "--cache-reuse 256", "-t 1", "--alias tiny-alias", "--metrics",
        "--reasoning-format deepseek"},
       1024,
       "tiny-alias"},
      {{kTinyModel, "--n-gpu-layers", "99", "-a", "tiny-a", "-fa", "--ctx-size", past,
        "--allow-long-context"},
       {"--n-gpu-layers 99", "-a tiny-a", "-fa"},
       trained + 4,
       "tiny-a"},
  };
  for (const Group& g : groups) {
    std::vector<std::string> args = g.args;
    if (std::find(args.begin(), args.end(), "-t") == args.end())
      args.insert(args.end(), {"--threads", "1"});
    ServeProcess s(args, "peer_flags_serve");
    ASSERT_NE(s.port(), 0) << s.log();
    const std::string log = s.log();
    for (const std::string& flag : g.noted)
      EXPECT_EQ(count_of(log, "invar serve: " + flag + " ("), 1u) << flag << ":\n" << log;
    EXPECT_EQ(count_of(log, "invar serve: WARNING: --ctx-size"), g.ctx > trained ? 1u : 0u) << log;
    EXPECT_EQ(get_json(s, "/props")["default_generation_settings"]["n_ctx"], g.ctx);
    EXPECT_EQ(get_json(s, "/v1/models")["data"][0]["id"], g.model_id);
  }
}

TEST(PeerFlagsServe, ValuesInvarCannotHonourAreRefusedNamingWhy) {
  const struct {
    std::string args, want;
  } cases[] = {
      {"--tensor-parallel-size 4",
       "--tensor-parallel-size 4 (vLLM): invar runs a model in one "
       "process on the CPU"},
      {"--dtype float16", "--dtype float16 (vLLM): invar computes in the GGUF file's own types"},
      {"--reasoning-parser deepseek_r1",
       "--reasoning-parser deepseek_r1 (vLLM): invar reads "
       "reasoning only as vLLM's qwen3 parser does"},
      {"--reasoning-format deepseek-legacy", "(llama-server): deepseek-legacy keeps"},
      {"-hf Qwen/Qwen3-8B-GGUF",
       "invar serve: -hf Qwen/Qwen3-8B-GGUF (llama-server): invar does "
       "not download: give the GGUF path (--model FILE)"},
      {"--hf-repo Qwen/Qwen3-8B-GGUF", "invar does not download: give the GGUF path"},
      {"-hfr Qwen/Qwen3-8B-GGUF", "invar does not download: give the GGUF path"},
      {"-c 1M", "--ctx-size 1048576 exceeds the "},
      {"--max-model-len 32x", "'32x' is not a count"},
  };
  for (const auto& c : cases) {
    const auto r = invar::test::command_run("timeout 20 " + kInvarBin + " serve --port 0 -m " +
                                            kTinyModel + " " + c.args + " 2>&1");
    EXPECT_NE(r.status, 0) << c.args << ": " << r.out;
    EXPECT_NE(r.status, 124) << c.args << " kept running";
    EXPECT_NE(r.out.find(c.want), std::string::npos) << c.args << ":\n" << r.out;
    EXPECT_EQ(r.out.find("listening"), std::string::npos) << c.args << ":\n" << r.out;
  }
  // A flag that is no peer's gets no misleading hint: -fx is not -c.
  const auto r = invar::test::command_run("timeout 20 " + kInvarBin + " serve -fx on 2>&1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("unknown flag -fx"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("did you mean"), std::string::npos) << r.out;
}

}  // namespace

}  // namespace peer_flags_serve_test
