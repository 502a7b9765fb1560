// The token-text index and the merge table built with it: ids found as a node-based map would
// find them (first id of a text that occurs twice), and merges whose results are not in merge
// order, or whose result text occurs twice, still resolve to the index's id.
#include "tokenizer/token_index.h"

#include <gtest/gtest.h>

#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace invar {
namespace token_index_test {

TEST(TokenIndex, FindsEveryTokenAsAMapWould) {
  std::vector<std::string> tokens;
  for (int i = 0; i < 5000; ++i) tokens.push_back("t" + std::to_string(i * 7919 % 100003));
  tokens.push_back("");
  tokens.push_back(std::string(40, 'x'));
  tokens.push_back(std::string("a\0b", 3));
  tokens.push_back("t0");  // a second id for the text of id 0
  std::unordered_map<std::string, int32_t> want;
  for (size_t i = 0; i < tokens.size(); ++i) want.emplace(tokens[i], int32_t(i));
  const TokenIndex index(tokens);
  EXPECT_FALSE(index.unique());
  for (const auto& [text, id] : want) EXPECT_EQ(index.find(text), id) << text;
  EXPECT_EQ(index.find("t0"), 0);
  EXPECT_EQ(index.find("absent"), -1);
  EXPECT_EQ(index.find(std::string("a\0c", 3)), -1);
  EXPECT_EQ(index.find(std::string(41, 'x')), -1);
  EXPECT_TRUE(TokenIndex(std::vector<std::string>{"a", "b"}).unique());
  EXPECT_EQ(TokenIndex().find("a"), -1);
}

Vocab vocab_of(std::vector<std::string> tokens, std::vector<std::string> merges) {
  Vocab v;
  v.tokens = std::move(tokens);
  v.merges = std::move(merges);
  return v;
}

TEST(TokenIndex, MergeResultsOutOfOrderOrDuplicated) {
  // In merge order (the results follow each other): "ab" = 3, "abc" = 4.
  EXPECT_EQ(Tokenizer(vocab_of({"a", "b", "c", "ab", "abc"}, {"a b", "ab c"})).encode("abc", false),
            std::vector<int32_t>{4});
  // Out of order: the id after the previous result is another token.
  EXPECT_EQ(Tokenizer(vocab_of({"a", "b", "c", "abc", "ab"}, {"a b", "ab c"})).encode("abc", false),
            std::vector<int32_t>{3});
  EXPECT_EQ(Tokenizer(vocab_of({"a", "b", "c", "ab", "bc", "abc"}, {"a b", "ab c"}))
                .encode("abcab", false),
            (std::vector<int32_t>{5, 3}));
  // The text of a result occurs twice, the later copy right after the previous result: the
  // merge makes the first id.
  EXPECT_EQ(Tokenizer(vocab_of({"a", "b", "c", "abc", "ab", "abc"}, {"a b", "ab c"}))
                .encode("abc", false),
            std::vector<int32_t>{3});
}

}  // namespace token_index_test
}  // namespace invar
