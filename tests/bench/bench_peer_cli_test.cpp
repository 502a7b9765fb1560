// `invar bench model --peer llama-bench=PATH`: a wrong flag is refused before any work with a
// message naming what is wrong; with a stand-in llama-bench (a shell script that answers as
// llama-bench -o json does, and logs its arguments) the bench runs each peer measure right after
// invar's, passes the same file, threads and sizes, and prints the ratio table from the peer's
// avg_ts. A failing or garbled peer stops the bench with its stderr in the message.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "command_run.h"
#include "test_process_dir.h"

namespace invar::test {
namespace {

const std::string kInvar = std::string(INVAR_BINARY_DIR) + "/apps/invar/invar";
const std::string kSmall = " --prompts 16 --decode 4 --threads 1";

std::string dir() {
  return test_process_dir("bench/peer");
}

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// A small Q4_0 qwen35 with the test vocabulary: decode well under the bandwidth roofline, which
// a cache-resident F32 model can pass on a loaded machine (the bench then stops, by design).
const std::string& model() {
  static const std::string path = [] {
    const std::string p = dir() + "/peer-model.gguf";
    const CommandResult r = command_run(
        kInvar +
        " make-model --arch qwen35 --embd 256 --layers 4 --interval 2 --heads 4 --heads-kv 1 "
        "--head-dim 16 --rot 8 --ff 256 --state 32 --groups 2 --v-heads 8 --type q4_0 --vocab " +
        std::string(INVAR_TEST_DATA_DIR) + "/models/qwen35-tiny.gguf --out " + p + " 2>&1");
    EXPECT_EQ(r.status, 0) << r.out;
    return p;
  }();
  return path;
}

// One `invar bench model` run (a rate above its roofline, as a loaded machine can make it look,
// is a warning on stderr, not a failure). The stand-in's argument log is cleared first.
CommandResult bench(const std::string& args) {
  std::filesystem::remove(dir() + "/args.log");
  return command_run(kInvar + " bench model" + args + " 2>&1");
}

// An executable script at dir()/name with the given body.
std::string script(const std::string& name, const std::string& body) {
  const std::string p = dir() + "/" + name;
  std::ofstream(p) << "#!/bin/sh\n" << body;
  chmod(p.c_str(), 0755);
  return p;
}

// Answers like llama-bench: prefill 100 tok/s, decode 20 tok/s, for the -p/-n/-t it was given.
const char* kFakeBody = R"(log="$(dirname "$0")/args.log"
echo "$*" >> "$log"
while [ $# -gt 0 ]; do
  case "$1" in -p) p=$2;; -n) n=$2;; -t) t=$2;; esac; shift
done
if [ "$p" -gt 0 ]; then ts=100.0; else ts=20.0; fi
echo "[ {\"n_prompt\": $p, \"n_gen\": $n, \"n_threads\": $t, \"avg_ts\": $ts, \"stddev_ts\": 0.5} ]"
)";

TEST(BenchPeer, BadFlagsAreRefusedBeforeAnyWork) {
  struct Bad {
    std::string args, message;
  } cases[] = {
      {" --model " + model() + " --peer llama-bench=/no/such/llama-bench",
       "--peer: llama-bench '/no/such/llama-bench' does not exist"},
      {" --model " + model() + " --peer llama-bench", "--peer: expected llama-bench=PATH"},
      {" --model " + model() + " --peer vllm=/bin/sh", "--peer: unknown peer 'vllm'"},
      {" --model " + model() + " --peer llama-bench=" + dir(), "is not an executable file"},
      {" --peer llama-bench=" + script("ok", "exit 0\n"), "--peer needs --model FILE"},
      {" --model " + model() + " --repeat 0", "--repeat: at least 1"},
  };
  for (const Bad& b : cases) {
    const CommandResult r = bench(b.args + kSmall);
    EXPECT_NE(r.status, 0) << b.args;
    EXPECT_TRUE(has(r.out, b.message)) << b.args << "\n" << r.out;
    EXPECT_FALSE(has(r.out, "loading")) << "work started: " << r.out;
  }
}

TEST(BenchPeer, RunsThePeerBetweenInvarsRunsAndPrintsTheRatios) {
  const std::string fake = script("llama-bench", kFakeBody);
  std::filesystem::remove(dir() + "/args.log");
  const CommandResult r =
      bench(" --model " + model() + kSmall + " --repeat 2 --peer llama-bench=" + fake);
  ASSERT_EQ(r.status, 0) << r.out;
  // The peer saw the same file and thread count; decode after as many tokens as invar's prompt.
  std::ifstream log(dir() + "/args.log");
  const std::string args((std::istreambuf_iterator<char>(log)), {});
  const std::string common = "-m " + model() + " -t 1 ";
  EXPECT_EQ(args, common + "-p 16 -n 0 -d 0 -r 1 -o json\n" + common +
                      "-p 0 -n 4 -d 16 -r 1 -o json\n" + common + "-p 16 -n 0 -d 0 -r 1 -o json\n" +
                      common + "-p 0 -n 4 -d 16 -r 1 -o json\n");
  // Interleaved: invar prefill, peer prefill, invar decode, peer decode.
  const size_t a = r.out.find("1 thread(s): prefill 16"), b = r.out.find("llama-bench prefill"),
               c = r.out.find("1 thread(s): decode 4"), d = r.out.find("llama-bench decode");
  ASSERT_NE(d, std::string::npos) << r.out;
  EXPECT_TRUE(a < b && b < c && c < d) << r.out;
  EXPECT_TRUE(has(r.out, "| file | measure | llama.cpp | invar | invar / llama.cpp |")) << r.out;
  EXPECT_TRUE(has(r.out, "| peer-model.gguf | prefill 16 tok/s, 1 thread(s) | 100.0 | ")) << r.out;
  EXPECT_TRUE(has(r.out, "| peer-model.gguf | decode tok/s, 1 thread(s) | 20.0 | ")) << r.out;
}

TEST(BenchPeer, WithoutPeerOnlyTheRooflineTable) {
  const CommandResult r = bench(" --model " + model() + kSmall);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "roofline")) << r.out;
  EXPECT_FALSE(has(r.out, "llama.cpp")) << r.out;
}

TEST(BenchPeer, AFailingOrGarbledPeerStopsTheBenchWithItsMessage) {
  const std::string failing = script("failing", "echo 'error: failed to load model' >&2\nexit 1\n");
  CommandResult r = bench(" --model " + model() + kSmall + " --peer llama-bench=" + failing);
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(has(r.out, "llama-bench failed")) << r.out;
  EXPECT_TRUE(has(r.out, "error: failed to load model")) << r.out;
  EXPECT_TRUE(has(r.out, "exit status 1")) << r.out;

  // A peer built for instructions this machine cannot run dies of SIGILL: the message names the
  // signal and the remedy instead of a bare status.
  const std::string illegal =
      script("illegal", "echo 'load_backend: loaded CPU' >&2\nkill -ILL $$\n");
  r = bench(" --model " + model() + kSmall + " --peer llama-bench=" + illegal);
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(has(r.out, "killed by signal 4 (SIGILL)")) << r.out;
  EXPECT_TRUE(has(r.out, "GGML_NATIVE=OFF")) << r.out;
  EXPECT_TRUE(has(r.out, "load_backend: loaded CPU")) << r.out;

  const std::string garbled = script("garbled", "echo 'main: not json'\n");
  r = bench(" --model " + model() + kSmall + " --peer llama-bench=" + garbled);
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(has(r.out, "not a JSON array")) << r.out;

  const std::string other = script("other",
                                   "echo '[{\"n_prompt\": 512, \"n_gen\": 0, "
                                   "\"n_threads\": 1, \"avg_ts\": 5}]'\n");
  r = bench(" --model " + model() + kSmall + " --peer llama-bench=" + other);
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(has(r.out, "no test with n_prompt 16, n_gen 0, n_threads 1")) << r.out;
}

}  // namespace
}  // namespace invar::test
