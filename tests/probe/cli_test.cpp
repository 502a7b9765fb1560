// `invar probe` end to end: exit status 0 stable / 3 diverged / 2 errors, --json prints exactly
// one object with exactly the documented keys, --html and --out write their files.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "probe/completion.h"

namespace invar::probe {
namespace cli_test {

namespace fs = std::filesystem;

struct Result {
  int status;
  std::string out;
};

Result invar(const std::string& args) {
  const std::string cmd =
      std::string(INVAR_BINARY_DIR) + "/apps/invar/invar probe " + args + " 2>/dev/null";
  FILE* f = popen(cmd.c_str(), "r");
  Result r{-1, ""};
  if (!f) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) r.out.append(buf, n);
  const int st = pclose(f);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string fake(const std::string& mode) {
  return "--server-cmd '" + std::string(PROBE_FAKE_SERVER) + " {port} " + mode + " openai'";
}

const std::string kSmall =
    " --preset seed --runs 2 --max-tokens 4 --threshold-span 1 --threshold-step 1";

TEST(ProbeCli, StableExitsZeroWithExactJson) {
  Result r = invar(fake("stable") + kSmall + " --json");
  EXPECT_EQ(r.status, 0) << r.out;
  // Exactly one JSON object: parsing the whole output must succeed.
  json j = json::parse(r.out);
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"target", "arms", "verdict"}));
  EXPECT_EQ(j["verdict"], "stable");
  ASSERT_EQ(j["arms"].size(), 4u);
  const json& a = j["arms"][0];
  keys.clear();
  for (auto it = a.begin(); it != a.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"name", "runs", "distinct", "first_divergent_token",
                                            "max_abs_dlogprob", "candidate_set_changes",
                                            "cached_tokens", "fingerprints"}));
  EXPECT_EQ(a["name"], "clean");
  EXPECT_EQ(a["runs"], 2);
  EXPECT_EQ(a["distinct"], (json{{"order", 1}, {"sorted", 1}, {"text", 1}}));
  EXPECT_TRUE(a["first_divergent_token"].is_null());
  EXPECT_EQ(a["cached_tokens"].size(), 2u);
  EXPECT_GT(a["cached_tokens"][1].get<int>(), 0);
  EXPECT_EQ(j["arms"][3]["runs"], 3 * 2);  // threshold: 3 cells of 2 runs
}

TEST(ProbeCli, DivergedExitsThreeAndWritesFiles) {
  const fs::path dir = fs::temp_directory_path() / ("probe-cli-" + std::to_string(getpid()));
  const fs::path html = dir / "r.html";
  fs::create_directories(dir);
  Result r = invar(fake("ulp") + kSmall + " --out " + dir.string() + " --html " + html.string());
  EXPECT_EQ(r.status, 3) << r.out;
  EXPECT_NE(r.out.find("verdict: diverged"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("clean"), std::string::npos);
  EXPECT_TRUE(fs::exists(html));
  EXPECT_TRUE(fs::exists(dir / "records.jsonl"));
  EXPECT_TRUE(fs::exists(dir / "report.json"));
  fs::remove_all(dir);
}

TEST(ProbeCli, ErrorsExitTwo) {
  EXPECT_EQ(invar(fake("stable") + " --preset nope").status, 2);
  EXPECT_EQ(invar("--preset seed").status, 2);  // no target
  EXPECT_EQ(invar("--server-cmd 'exit 1 # {port}' --preset seed --health-timeout 5").status, 2);
}

}  // namespace cli_test
}  // namespace invar::probe
