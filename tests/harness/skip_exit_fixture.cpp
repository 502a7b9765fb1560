// The cases skip_exit_test runs through the tests' main (tests/gtest_source_main.cpp) to see
// which exit status each mix of passed, skipped and failed cases gives. Not a test of its own:
// Fixture.Fails fails on purpose.
#include <gtest/gtest.h>

TEST(Fixture, Passes) {
  SUCCEED();
}

TEST(Fixture, Skips) {
  GTEST_SKIP() << "the fixture's reason";
}

TEST(Fixture, Fails) {
  FAIL() << "the fixture's failure";
}

// A case that fails, then skips: a failure, however the case ends.
TEST(Fixture, FailsThenSkips) {
  ADD_FAILURE() << "the fixture's failure before a skip";
  GTEST_SKIP() << "skipped after failing";
}
