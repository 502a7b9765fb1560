// llama.cpp (the pinned peer, commit d32676d77) loads and runs the files `invar make-model`
// writes: each architecture, in F32 and in the Q4_K_M preset, through llama-bench (-p 16 -n 4
// -r 1: the model loaded, a prompt and a few decode steps run, rates reported) and one through
// llama-cli with a fixed prompt. The peer's bin folder comes from INVAR_LLAMA_CPP_BIN (the
// environment, or `cmake -DINVAR_LLAMA_CPP_BIN=...`); without it the test is skipped and says so.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "command_run.h"
#include "test_process_dir.h"

namespace invar::test {
namespace {

const std::string kInvar = std::string(INVAR_BINARY_DIR) + "/apps/invar/invar";

std::string peer_bin() {
  const char* env = std::getenv("INVAR_LLAMA_CPP_BIN");
  return env ? env : "";
}

// A small model of `arch` in `type` with the test vocabulary of that architecture's tiny model.
std::string model(const std::string& arch, const std::string& type) {
  const std::string vocab = std::string(INVAR_TEST_DATA_DIR) + "/models/" +
                            (arch == "qwen3next" ? "qwen3next" : "qwen35") + "-tiny.gguf";
  const std::string p = test_process_dir("bench/llama-cpp") + "/" + arch + "-" + type + ".gguf";
  const CommandResult r =
      command_run(kInvar + " make-model --arch " + arch + " --embd 256 --layers 4 --type " + type +
                  " --vocab " + vocab + " --out " + p + " 2>&1");
  EXPECT_EQ(r.status, 0) << r.out;
  return p;
}

#define SKIP_WITHOUT_PEER()                                                                    \
  if (peer_bin().empty() || !std::filesystem::exists(peer_bin() + "/llama-bench"))             \
  GTEST_SKIP() << "llama.cpp not given: set INVAR_LLAMA_CPP_BIN to its build/bin folder "      \
                  "(environment, or cmake -DINVAR_LLAMA_CPP_BIN=...) to check that llama.cpp " \
                  "loads make-model files"

TEST(LlamaCppPeer, BenchRunsEveryArchitectureAndType) {
  SKIP_WITHOUT_PEER();
  for (const char* arch : {"qwen3next", "qwen35", "qwen35moe"}) {
    for (const char* type : {"f32", "q4_k_m"}) {
      const std::string path = model(arch, type);
      const CommandResult r = command_run(peer_bin() + "/llama-bench -m " + path +
                                          " -p 16 -n 4 -r 1 -t 2 -o json 2>&1");
      const std::string what = std::string(arch) + " " + type + ": llama-bench\n" + r.out;
      ASSERT_EQ(r.status, 0) << what;
      const auto json_at = r.out.find('[');
      ASSERT_NE(json_at, std::string::npos) << what;
      const auto tests = nlohmann::json::parse(r.out.substr(json_at), nullptr, false);
      ASSERT_TRUE(tests.is_array() && tests.size() == 2) << what;
      for (const auto& t : tests) EXPECT_GT(t.value("avg_ts", 0.0), 0) << what;
    }
  }
}

// One turn of llama-cli on the file's own chat template: the model loads, the prompt is read and 4
// tokens generated (random weights: their text is not checked), then the process exits.
TEST(LlamaCppPeer, CliAnswersOneTurn) {
  SKIP_WITHOUT_PEER();
  const std::string path = model("qwen35", "q4_k_m");
  const CommandResult r = command_run(peer_bin() + "/llama-cli -m " + path +
                                      " -p 'The quick brown fox' -n 4 --no-warmup -st --simple-io "
                                      "--temp 0 -t 2 < /dev/null 2>&1");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find("failed to load"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace invar::test
