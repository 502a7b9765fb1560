// Skips that show: the tests' main exits 77 (CTest's SKIP_RETURN_CODE) when a case skipped and
// none failed, naming each skipped case and its reason; a failure beside a skip stays a failure;
// and every CTest entry of the tree reads 77 as "skipped" (cmake/invar.cmake).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "command_run.h"

namespace {

using invar::test::command_run;
using invar::test::CommandResult;

CommandResult fixture(const std::string& filter) {
  return command_run(std::string(INVAR_SKIP_FIXTURE) + " --gtest_filter=" + filter + " 2>&1");
}

}  // namespace

TEST(SkipExit, PassesOnlyExitZero) {
  const CommandResult r = fixture("Fixture.Passes");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find("SKIPPED TEST"), std::string::npos) << r.out;
}

TEST(SkipExit, SkipBesidePassExits77NamingTheCaseAndReason) {
  const CommandResult r = fixture("Fixture.Passes:Fixture.Skips");
  EXPECT_EQ(r.status, 77) << r.out;
  EXPECT_NE(r.out.find("SKIPPED TEST Fixture.Skips: the fixture's reason"), std::string::npos)
      << r.out;
}

TEST(SkipExit, FailureBesideSkipIsAFailure) {
  const CommandResult r = fixture("Fixture.Skips:Fixture.Fails");
  EXPECT_EQ(r.status, 1) << r.out;
}

TEST(SkipExit, CaseThatFailsThenSkipsIsAFailure) {
  const CommandResult r = fixture("Fixture.FailsThenSkips");
  EXPECT_EQ(r.status, 1) << r.out;
}

// Every entry CTest knows in this build tree, GoogleTest or script, reads exit 77 as a skip: an
// entry without it would report a skip as a failure (safe, but unexplained), and an entry whose
// script exits 0 after skipping would pass; the latter is the scripts' own convention to keep.
TEST(SkipExit, EveryCtestEntryReadsExit77AsSkipped) {
  const CommandResult r =
      command_run("cd '" INVAR_BINARY_DIR "' && '" INVAR_CTEST "' --show-only=json-v1");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json listing = nlohmann::json::parse(r.out);
  ASSERT_GT(listing["tests"].size(), 10u);
  for (const auto& t : listing["tests"]) {
    bool has = false;
    for (const auto& p : t.value("properties", nlohmann::json::array())) {
      has = has || (p["name"] == "SKIP_RETURN_CODE" && p["value"] == 77);
    }
    EXPECT_TRUE(has) << t["name"] << " has no SKIP_RETURN_CODE 77 (invar_tests_skip_code())";
  }
}
