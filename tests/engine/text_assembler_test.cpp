// Streaming text: never a split UTF-8 character, stop strings cut exactly, whatever the token
// boundaries.
#include "engine/text_assembler.h"

#include <gtest/gtest.h>

#include "core/utf8.h"

using namespace invar;

namespace text_assembler_test {

// Feeds `pieces` one by one; returns what was released, in order, with each release recorded.
std::string feed(TextAssembler& a, const std::vector<std::string>& pieces,
                 std::vector<std::string>* releases = nullptr) {
  std::string out;
  for (auto& p : pieces) {
    std::string r = a.push(p);
    if (releases) releases->push_back(r);
    out += r;
  }
  if (!a.stopped()) out += a.finish();
  return out;
}

}  // namespace text_assembler_test
using namespace text_assembler_test;

TEST(Utf8, SanitizeReplacesIllFormed) {
  EXPECT_EQ(utf8::lossy("abc"), "abc");
  EXPECT_EQ(utf8::lossy("\xC3\xA9"), "\xC3\xA9");
  EXPECT_EQ(utf8::lossy("a\xFFz"), "a\xEF\xBF\xBDz");
  EXPECT_EQ(utf8::lossy("\xE2\x82"), "\xEF\xBF\xBD");  // truncated 3-byte: one U+FFFD
  EXPECT_EQ(utf8::lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(utf8::lossy("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // overlong
}

TEST(Utf8, CompletePrefix) {
  EXPECT_EQ(utf8::complete_prefix("ab\xE2\x82"), 2u);
  EXPECT_EQ(utf8::complete_prefix("ab\xE2\x82\xAC"), 5u);
  EXPECT_EQ(utf8::complete_prefix("ab\xF0"), 2u);
  EXPECT_EQ(utf8::complete_prefix("ab\xFF"), 3u);  // cannot start a character: not held
}

TEST(TextAssembler, NeverSplitsACharacter) {
  // "€" (E2 82 AC) and "😀" (F0 9F 98 80) split across byte tokens.
  TextAssembler a({});
  std::vector<std::string> releases;
  std::string out =
      feed(a, {"a", "\xE2", "\x82", "\xAC", "\xF0\x9F", "\x98", "\x80", "b"}, &releases);
  EXPECT_EQ(out,
            "a\xE2\x82\xAC\xF0\x9F\x98\x80"
            "b");
  for (auto& r : releases) EXPECT_EQ(utf8::lossy(r), r) << "a release is not valid UTF-8";
  EXPECT_EQ(releases[1], "");  // the first byte of € is held back
  EXPECT_EQ(releases[3], "\xE2\x82\xAC");
}

TEST(TextAssembler, UnfinishedCharacterAtEndBecomesReplacement) {
  TextAssembler a({});
  EXPECT_EQ(feed(a, {"x", "\xE2\x82"}), "x\xEF\xBF\xBD");
}

TEST(TextAssembler, StopStringAcrossTokens) {
  TextAssembler a({"END"});
  std::vector<std::string> releases;
  std::string out = feed(a, {"hello E", "N", "Dmore"}, &releases);
  EXPECT_TRUE(a.stopped());
  EXPECT_EQ(out, "hello ");
  EXPECT_EQ(a.push("x"), "");  // ignored after the stop
  for (auto& r : releases) EXPECT_EQ(r.find('E'), std::string::npos) << "released part of the stop";
}

TEST(TextAssembler, HeldBackPrefixReleasedWhenNotAStop) {
  TextAssembler a({"END"});
  EXPECT_EQ(feed(a, {"E", "N", "x"}), "ENx");
  EXPECT_FALSE(a.stopped());
}

TEST(TextAssembler, EarliestOfSeveralStops) {
  TextAssembler a({"cd", "b"});
  EXPECT_EQ(feed(a, {"abcd"}), "a");
}
