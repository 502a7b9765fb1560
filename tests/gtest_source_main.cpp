// The main of a test executable that holds the tests of several source files (a module's tests
// compile as a few unity batches, which CI's build time needs: invar_test(... IN exe) in
// cmake/invar.cmake). `--source=NAME.cpp` (repeatable) runs only the tests defined in those
// files, so each file group keeps its own CTest entry, timeout, labels and environment.
// Without --source every test runs, as with GoogleTest's own main. Every test executable uses
// this main (cmake/invar.cmake).
//
// Exit status: GoogleTest's (0 when every test that ran passed), except that a run where no test
// failed and at least one was skipped (GTEST_SKIP) exits with kSkipExit after naming each skipped
// test and its reason. CTest's SKIP_RETURN_CODE (set on every test, tests/CMakeLists.txt) then
// reports the entry as skipped rather than passed. A failure always wins: a run with a failed
// test keeps GoogleTest's non-zero status, however many tests were skipped beside it.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>
#include <string_view>

namespace {

// The status CTest reads as "skipped" (the Automake convention), SKIP_RETURN_CODE in
// tests/CMakeLists.txt.
constexpr int kSkipExit = 77;

std::string_view base_name(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// Names each skipped test with the message of its GTEST_SKIP; returns how many were skipped.
int report_skips(const testing::UnitTest& unit) {
  int skipped = 0;
  for (int s = 0; s < unit.total_test_suite_count(); ++s) {
    const testing::TestSuite& suite = *unit.GetTestSuite(s);
    for (int t = 0; t < suite.total_test_count(); ++t) {
      const testing::TestInfo& info = *suite.GetTestInfo(t);
      const testing::TestResult& r = *info.result();
      if (!info.should_run() || !r.Skipped()) continue;
      ++skipped;
      std::string why;
      for (int i = 0; i < r.total_part_count(); ++i) {
        if (r.GetTestPartResult(i).skipped()) why = r.GetTestPartResult(i).message();
      }
      std::printf("SKIPPED TEST %s.%s: %s\n", info.test_suite_name(), info.name(),
                  why.empty() ? "(no reason given)" : why.c_str());
    }
  }
  return skipped;
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  std::set<std::string, std::less<>> sources;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a.rfind("--source=", 0) == 0) {
      sources.emplace(a.substr(9));
    } else {
      std::fprintf(stderr, "%s: unknown argument '%s' (expected --source=FILE.cpp)\n", argv[0],
                   argv[i]);
      return 2;
    }
  }
  // A death test in the "threadsafe" style re-runs this binary with its own filter: keep it.
  if (!GTEST_FLAG_GET(internal_run_death_test).empty()) sources.clear();
  if (!sources.empty()) {
    if (GTEST_FLAG_GET(filter) != "*") {
      std::fprintf(stderr, "%s: --source and --gtest_filter together: give one of them\n", argv[0]);
      return 2;
    }
    std::string filter;
    std::set<std::string, std::less<>> seen;
    const testing::UnitTest& unit = *testing::UnitTest::GetInstance();
    for (int s = 0; s < unit.total_test_suite_count(); ++s) {
      const testing::TestSuite& suite = *unit.GetTestSuite(s);
      for (int t = 0; t < suite.total_test_count(); ++t) {
        const testing::TestInfo& info = *suite.GetTestInfo(t);
        const std::string_view file = base_name(info.file());
        if (sources.count(file) == 0) continue;
        seen.emplace(file);
        if (!filter.empty()) filter += ':';
        filter += std::string(info.test_suite_name()) + "." + info.name();
      }
    }
    // An entry that runs nothing must fail, not pass. (A test's helper files, e.g. the ISA
    // halves of a kernel test, are named too and define no test themselves.)
    if (seen.empty()) {
      std::fprintf(stderr, "%s: no test is defined in the files given with --source\n", argv[0]);
      return 2;
    }
    GTEST_FLAG_SET(filter, filter);
  }
  const int status = RUN_ALL_TESTS();
  if (status != 0) return status;
  if (report_skips(*testing::UnitTest::GetInstance()) > 0) return kSkipExit;
  return 0;
}
