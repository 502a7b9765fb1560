// `invar bench serve` through the binary on the tiny model: bad flags are refused before any
// work, an unstartable peer stops the bench with its log, the smallest run against invar alone
// prints its table with tokens generated and prompt tokens served from the cache (each
// document's later questions), and writes the plot. A stand-in llama-server (a script that
// turns llama-server's flags into `invar serve`'s) runs the side-by-side path: two rows a load,
// rounds in turn, the peer given the same model, threads and slots. No time is asserted.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "command_run.h"
#include "test_process_dir.h"

namespace invar::test {
namespace {

const std::string kInvar = std::string(INVAR_BINARY_DIR) + "/apps/invar/invar";
const std::string kModel = std::string(INVAR_TEST_DATA_DIR) + "/models/qwen3next-tiny.gguf";
const std::string kSmall =
    " --model " + kModel + " --quick --concurrency 1 --threads 1 --parallel 2";

std::string dir() {
  return test_process_dir("bench/serve");
}

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

CommandResult bench(const std::string& args) {
  return command_run(kInvar + " bench serve" + args + " 2>&1");
}

std::string script(const std::string& name, const std::string& body) {
  const std::string p = dir() + "/" + name;
  std::ofstream(p) << "#!/bin/sh\n" << body;
  chmod(p.c_str(), 0755);
  return p;
}

// The table row of `server` at `load`, split into its cells (without the empty outer ones).
std::vector<std::string> row(const std::string& out, const std::string& load,
                             const std::string& server) {
  const std::string start = "| " + load + " | " + server + " |";
  const size_t at = out.find(start);
  if (at == std::string::npos) return {};
  const std::string line = out.substr(at + 1, out.find('\n', at) - at - 1);
  std::vector<std::string> cells;
  std::stringstream ss(line);
  for (std::string c; std::getline(ss, c, '|');) cells.push_back(c);
  if (!cells.empty() && cells.back().find_first_not_of(' ') == std::string::npos) cells.pop_back();
  return cells;
}

TEST(BenchServe, BadFlagsAreRefusedBeforeAnyWork) {
  struct Bad {
    std::string args, message;
  } cases[] = {
      {" --peer llama-server=/no/such/llama-server",
       "--peer: llama-server '/no/such/llama-server' does not exist"},
      {" --peer llama-server", "--peer: expected llama-server=PATH"},
      {" --peer llama-bench=/bin/sh", "--peer: unknown peer 'llama-bench'"},
      {" --concurency 4", "did you mean --concurrency"},
      {" --concurrency 1,0", "--concurrency: every entry must be >= 1"},
      {" --doc-tokens 900,300", "--doc-tokens: expected MIN,MAX with MIN < MAX"},
      {" --sampling hot", "--sampling: 'hot' is not greedy, seeded or mixed"},
      {" --model /no/such.gguf", "no model file at /no/such.gguf"},
      {" --plot /no/such/dir/plot.svg", "--plot: no folder for /no/such/dir/plot.svg"},
  };
  for (const Bad& b : cases) {
    const CommandResult r = bench(b.args);
    EXPECT_NE(r.status, 0) << b.args;
    EXPECT_TRUE(has(r.out, b.message)) << b.args << "\n" << r.out;
    EXPECT_FALSE(has(r.out, "parallel slot(s)")) << "work started: " << r.out;
  }
}

TEST(BenchServe, HelpExplainsEveryOption) {
  const CommandResult r = bench(" --help");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* flag :
       {"--peer", "--threads", "--ctx", "--parallel", "--documents", "--questions", "--doc-tokens",
        "--max-tokens", "--concurrency", "--rate", "--rounds", "--quick", "--sampling",
        "--endpoint", "--plot", "--work-dir", "--startup-timeout"})
    EXPECT_TRUE(has(r.out, flag)) << flag << "\n" << r.out;
}

TEST(BenchServe, AnUnstartablePeerStopsTheBenchWithItsLog) {
  const std::string failing =
      script("llama-server", "echo 'error: unknown model architecture: qwen3next' >&2\nexit 1\n");
  const CommandResult r = bench(kSmall + " --rounds 1 --peer llama-server=" + failing);
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(has(r.out, failing + " did not start")) << r.out;
  EXPECT_TRUE(has(r.out, "exit status 1")) << r.out;
  EXPECT_TRUE(has(r.out, "unknown model architecture: qwen3next")) << r.out;
}

// The last round at the highest concurrency is sent again one request at a time: the same text
// and top logprobs, token by token (3 clients on 3 slots: the requests ran batched, mixed
// greedy and seeded sampling).
TEST(BenchServe, AnswersUnderLoadEqualTheirSoloRuns) {
  const CommandResult r =
      bench(" --model " + kModel + " --quick --concurrency 3 --threads 1 --parallel 3 --rounds 1");
  ASSERT_EQ(r.status, 0) << r.out;
  // 2 documents x 3 questions, 8 tokens each: 48 tokens' logprobs compared.
  EXPECT_TRUE(has(r.out,
                  "invar under load (c=3) = alone: 6 of 6 answers identical (text, and 48 "
                  "tokens' top logprobs), as the contract requires"))
      << r.out;
}

TEST(BenchServe, InvarAlonePrintsTheTableWithCachedPromptTokens) {
  const std::string plot = dir() + "/alone.svg";
  const CommandResult r = bench(kSmall + " --rounds 1 --plot " + plot);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out,
                  "| load | server | gen tok/s | prompt tok/s computed | "
                  "prompt tok/s cached | TTFT p50 s |"))
      << r.out;
  const std::vector<std::string> cells = row(r.out, "c=1", "invar");
  ASSERT_EQ(cells.size(), 10u) << r.out;
  EXPECT_GT(std::stod(cells[2]), 0) << "generated tok/s\n" << r.out;
  EXPECT_GT(std::stod(cells[3]), 0) << "computed prompt tok/s\n" << r.out;
  // Each document's second and third questions share it as a prefix.
  EXPECT_GT(std::stod(cells[4]), 0) << "cached prompt tok/s\n" << r.out;
  EXPECT_EQ(std::stoi(cells[9]), 0) << "errors\n" << r.out;
  EXPECT_FALSE(has(r.out, "llama-server")) << r.out;
  EXPECT_TRUE(has(r.out, "machine (1 thread(s)): FMA peak")) << r.out;
  std::ifstream in(plot);
  const std::string svg((std::istreambuf_iterator<char>(in)), {});
  EXPECT_TRUE(has(svg, "<svg") && has(svg, "<polyline") && has(svg, "TTFT p99")) << svg;
}

// llama-server's flags as the bench passes them, turned into invar serve's; the arguments are
// logged.
const char* kStandIn = R"(echo "$*" > "$(dirname "$0")/args.log"
while [ $# -gt 0 ]; do
  case "$1" in
    -m) m=$2; shift;; -t) t=$2; shift;; -np) np=$2; shift;; --host) h=$2; shift;;
    --port) p=$2; shift;; -tb|-c) shift;;
  esac; shift
done
exec )";

TEST(BenchServe, APeerRunsInTurnOnTheSameLoad) {
  const std::string peer =
      script("stand-in", kStandIn + kInvar +
                             " serve --model \"$m\" --threads \"$t\" -np \"$np\" --host \"$h\" "
                             "--port \"$p\"\n");
  const CommandResult r = bench(kSmall + " --rounds 2 --peer llama-server=" + peer);
  ASSERT_EQ(r.status, 0) << r.out;
  std::ifstream log(dir() + "/args.log");
  const std::string args((std::istreambuf_iterator<char>(log)), {});
  EXPECT_TRUE(has(args, "-m " + kModel + " -t 1 -tb 1 -c 1536 -np 2")) << args;
  // Rounds alternate: invar, peer, invar, peer.
  const size_t a = r.out.find("c=1 round 1/2 invar"), b = r.out.find("c=1 round 1/2 llama-server"),
               c = r.out.find("c=1 round 2/2 invar"), d = r.out.find("c=1 round 2/2 llama-server");
  ASSERT_NE(d, std::string::npos) << r.out;
  EXPECT_TRUE(a < b && b < c && c < d) << r.out;
  for (const char* server : {"invar", "llama-server"}) {
    const std::vector<std::string> cells = row(r.out, "c=1", server);
    ASSERT_EQ(cells.size(), 10u) << server << "\n" << r.out;
    EXPECT_GT(std::stod(cells[2]), 0) << server << "\n" << r.out;
    EXPECT_GT(std::stod(cells[4]), 0) << server << "\n" << r.out;
  }
}

}  // namespace
}  // namespace invar::test
