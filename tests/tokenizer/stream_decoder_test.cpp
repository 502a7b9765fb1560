// Streaming detokenisation and the UTF-8 helpers under it.
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdlib>
#include <random>

#include "test_support.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace invar {
namespace stream_decoder_test {

TEST(Utf8, LossyReplacesMaximalSubparts) {
  EXPECT_EQ(utf8::lossy("abc"), "abc");
  EXPECT_EQ(utf8::lossy("\xE2\x80"), "\xEF\xBF\xBD");  // truncated: one U+FFFD
  EXPECT_EQ(utf8::lossy("\xF0\x80\x80"),
            "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // F0 needs 90..BF
  EXPECT_EQ(utf8::lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(utf8::lossy("\xE2\x80"
                        "A"),
            "\xEF\xBF\xBD"
            "A");
  EXPECT_EQ(utf8::lossy("\xFF"), "\xEF\xBF\xBD");
  EXPECT_EQ(utf8::lossy("\xC3\xA9\xF0\x9F\x98\x80"), "\xC3\xA9\xF0\x9F\x98\x80");
}

TEST(Utf8, FirstInvalidAndIncompleteTail) {
  EXPECT_EQ(utf8::first_invalid("plain ascii text, long enough for the word loop"), 47u);
  EXPECT_EQ(utf8::first_invalid("abcdefghij\xC0\x80"), 10u);  // overlong
  EXPECT_EQ(utf8::first_invalid("\xF4\x90\x80\x80"), 0u);     // above U+10FFFF
  EXPECT_EQ(utf8::incomplete_tail("a\xF0\x9F\x98"), 3u);
  EXPECT_EQ(utf8::incomplete_tail("a\xF0\x9F\x98\x80"), 0u);
  EXPECT_EQ(utf8::incomplete_tail("a\xC3"), 1u);
  EXPECT_EQ(utf8::incomplete_tail("a\x80"), 0u);      // a stray continuation is not held
  EXPECT_EQ(utf8::incomplete_tail("a\xE0\x80"), 0u);  // can never complete
}

TEST(Utf8, ChunkedNfcEqualsWholeTextNfc) {
  // Bases, combining marks (out of canonical order too), Hangul jamo, singletons, Latin-1.
  const std::vector<std::string> parts = {"a",
                                          "e",
                                          "q",
                                          " ",
                                          "<",
                                          "\xC3\xA9",
                                          "\xC4\xB1",
                                          "\xCC\x81",
                                          "\xCC\xA3",
                                          "\xCC\x87",
                                          "\xCC\x88",
                                          "\xCC\xB8",
                                          "\xE1\x84\x80",
                                          "\xE1\x85\xA1",
                                          "\xE1\x86\xA8",
                                          "\xE2\x84\xAB",
                                          "\xE6\x97\xA5"};
  std::mt19937 rng(3);
  int changed = 0;
  for (int t = 0; t < 2000; ++t) {
    std::string s;
    const int len = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < len; ++i) s += parts[rng() % parts.size()];
    char* whole =
        reinterpret_cast<char*>(utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(s.c_str())));
    ASSERT_NE(whole, nullptr);
    EXPECT_EQ(utf8::nfc(s), std::string(whole)) << test::printable(s);
    changed += std::string(whole) != s;
    std::free(whole);
  }
  EXPECT_GT(changed, 500);  // normalisation really changed many of the inputs
}

TEST(ByteLevel, AlphabetRoundTrips) {
  EXPECT_EQ(byte_level::encode(" \n"), "\xC4\xA0\xC4\x8A");  // Ġ Ċ
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(byte_level::decode(byte_level::encode(all)).value(), all);
  EXPECT_FALSE(byte_level::decode("\xE4\xB8\x80").has_value());  // 一 is not in the alphabet
}

class Stream : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tok_ = Tokenizer::from_file(test::source_path("data/qwen3/tokenizer.json")).release();
  }
  static void TearDownTestSuite() { delete tok_; }
  static Tokenizer* tok_;
};
Tokenizer* Stream::tok_ = nullptr;

TEST_F(Stream, HoldsBackCharactersSplitAcrossTokens) {
  // 😶‍🌫️: the first two tokens end inside U+200D's UTF-8 (decode_cases.json entry 10).
  const std::vector<int32_t> ids = {146440, 378, 235, 149921, 30543};
  ASSERT_NE(utf8::incomplete_tail(tok_->decode(std::span(ids).first(2))), 0u);
  StreamDecoder sd(*tok_);
  std::string out;
  int held = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string piece = sd.push(ids[i]);
    EXPECT_EQ(utf8::first_invalid(piece), piece.size()) << "partial UTF-8 emitted";
    held += utf8::incomplete_tail(tok_->decode(std::span(ids).first(i + 1))) != 0;
    out += piece;
  }
  out += sd.flush();
  EXPECT_GT(held, 0);  // the condition under test really happened
  EXPECT_EQ(out, "\xF0\x9F\x98\xB6\xE2\x80\x8D\xF0\x9F\x8C\xAB\xEF\xB8\x8F");
}

TEST_F(Stream, SingleByteTokensAssembleOneCharacter) {
  const std::string smile = "\xF0\x9F\x98\x80";  // 😀 as four byte tokens
  StreamDecoder sd(*tok_);
  std::string out;
  for (size_t i = 0; i < smile.size(); ++i) {
    const int32_t id = tok_->token_id(byte_level::encode_byte(static_cast<uint8_t>(smile[i])));
    ASSERT_GE(id, 0);
    const std::string piece = sd.push(id);
    if (i + 1 < smile.size()) {
      EXPECT_EQ(piece, "") << "byte " << i;
    }
    out += piece;
  }
  EXPECT_EQ(out, smile);
  EXPECT_EQ(sd.flush(), "");
}

TEST_F(Stream, InvalidAndDanglingBytesBecomeReplacementCharacters) {
  StreamDecoder sd(*tok_);
  const int32_t ff = tok_->token_id(byte_level::encode_byte(0xFF));
  const int32_t e2 = tok_->token_id(byte_level::encode_byte(0xE2));
  EXPECT_EQ(sd.push(ff), "\xEF\xBF\xBD");
  EXPECT_EQ(sd.push(e2), "");
  EXPECT_EQ(sd.flush(), "\xEF\xBF\xBD");
}

TEST_F(Stream, ConcatenationEqualsLossyDecodeOnRandomIds) {
  std::mt19937 rng(11);
  for (int t = 0; t < 200; ++t) {
    std::vector<int32_t> ids;
    for (int i = 0; i < 12; ++i) ids.push_back(static_cast<int32_t>(rng() % 151669));
    StreamDecoder sd(*tok_);
    std::string out;
    for (int32_t id : ids) out += sd.push(id);
    out += sd.flush();
    EXPECT_EQ(out, utf8::lossy(tok_->decode(ids)));
  }
}

}  // namespace stream_decoder_test
}  // namespace invar
