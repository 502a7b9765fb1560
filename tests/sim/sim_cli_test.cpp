// `invar simulate` through the real binary: --json shape, sweep output, bad flags.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace sim_cli_test {

const std::string kInvar = std::string(INVAR_BINARY_DIR) + "/apps/invar/invar";

std::string run(const std::string& args, int* status) {
  std::string out;
  FILE* p = popen((kInvar + " " + args + " 2>&1").c_str(), "r");
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  *status = WEXITSTATUS(pclose(p));
  return out;
}

std::string write_trace() {
  const std::string path = std::string(INVAR_BINARY_DIR) + "/sim_cli_trace.json";
  std::ofstream(path) << R"({"documents": {"D": 3100}, "requests": [)"
                      << R"({"name": "A", "doc": "D", "tail": 96},)"
                      << R"({"name": "B", "doc": "D", "tail": 900, "repeat": 3}]})";
  return path;
}

TEST(SimulateCli, JsonShape) {
  int st;
  const auto out =
      run("simulate --policy vllm-align --spec mtp --json --trace " + write_trace(), &st);
  ASSERT_EQ(st, 0) << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["policy"], "vllm-align");
  EXPECT_EQ(j["block_size"], 1600);
  EXPECT_EQ(j["spec"], "mtp");
  EXPECT_EQ(j["budget"], 8192);
  ASSERT_EQ(j["runs"].size(), 4u);
  const auto& b2 = j["runs"][2];
  EXPECT_EQ(b2["request"], "B");
  EXPECT_EQ(b2["run"], 2);
  EXPECT_EQ(b2["prompt_tokens"], 4000);
  EXPECT_EQ(b2["cached_tokens"], 1600);
  EXPECT_EQ(b2["predicted"], "diverges");
  EXPECT_EQ(j["runs"][1]["steps"], nlohmann::json::parse("[[0,1600],[1600,4000]]"));
  EXPECT_EQ(j["runs"][1]["states_written"], nlohmann::json::parse("[1600]"));
  EXPECT_EQ(j["runs"][1]["signature"].get<std::string>().size(), 64u);
}

TEST(SimulateCli, SweepJson) {
  int st;
  const auto out =
      run("simulate --spec mtp --json --sweep A=3198..3201 --trace " + write_trace(), &st);
  ASSERT_EQ(st, 0) << out;
  const auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j["sweep"].size(), 4u);
  EXPECT_EQ(j["sweep"][0]["length"], 3198);
  EXPECT_EQ(j["sweep"][1]["predicted"], "diverges");
  EXPECT_EQ(j["sweep"][2]["length"], 3200);
  EXPECT_EQ(j["sweep"][2]["predicted"], "stable");
}

TEST(SimulateCli, BadInputIsAClearError) {
  int st;
  auto out = run("simulate --policy nope --trace " + write_trace(), &st);
  EXPECT_EQ(st, 2);
  EXPECT_NE(out.find("--policy must be"), std::string::npos) << out;
  out = run("simulate --trace /nonexistent.json", &st);
  EXPECT_EQ(st, 2);
  EXPECT_NE(out.find("cannot open"), std::string::npos) << out;
  out = run("simulate --sweep A=x --trace " + write_trace(), &st);
  EXPECT_EQ(st, 2);
  EXPECT_NE(out.find("NAME=LO..HI"), std::string::npos) << out;
}

}  // namespace sim_cli_test
