// Every case of the shared Qwen3 case files (HF tokenizers' own output) against
// data/qwen3/tokenizer.json, plus properties the cases do not pin down.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <random>
#include <thread>

#include "chat/chat_request.h"
#include "chat/template.h"
#include "core/error.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace invar {
namespace qwen3_cases_test {

using test::ids_diff;
using test::printable;

class Qwen3Tokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tok_ = Tokenizer::from_file(test::source_path("data/qwen3/tokenizer.json")).release();
  }
  static void TearDownTestSuite() {
    delete tok_;
    tok_ = nullptr;
  }
  static const Tokenizer& tok() { return *tok_; }
  static Tokenizer* tok_;
};
Tokenizer* Qwen3Tokenizer::tok_ = nullptr;

TEST_F(Qwen3Tokenizer, VocabularyFacts) {
  const Vocab& v = tok().vocab();
  EXPECT_EQ(tok().n_vocab(), 151669);
  EXPECT_EQ(v.merges.size(), 151387u);
  EXPECT_EQ(v.pre, "qwen2");
  EXPECT_EQ(v.eos_id, 151645);
  EXPECT_EQ(v.pad_id, 151643);
  EXPECT_EQ(v.bos_id, -1);
  EXPECT_FALSE(v.add_bos);
  EXPECT_EQ(tok().token_id("<|im_start|>"), 151644);
  EXPECT_EQ(tok().token_id("</think>"), 151668);
  EXPECT_EQ(tok().token_id("no such token"), -1);
  EXPECT_EQ(v.token_types[151644], 3);  // special -> control
  EXPECT_EQ(v.token_types[151667], 4);  // <think> is not special -> user-defined
  EXPECT_NE(v.chat_template.find("<think>"), std::string::npos);  // Qwen3's own template
}

TEST_F(Qwen3Tokenizer, EncodeCases) {
  const auto cases = test::load_json(test::data_path("tokenizers/qwen3/cases.json"));
  ASSERT_EQ(cases.size(), 84u);
  int failed = 0;
  for (const auto& c : cases) {
    const std::string text = c["text"];
    const std::vector<int32_t> want = c["ids"];
    const std::string d = ids_diff(want, tok().encode(text, /*parse_special=*/true));
    if (!d.empty()) {
      ++failed;
      ADD_FAILURE() << "NOT OK \"" << printable(text) << "\": " << d;
    }
  }
  EXPECT_EQ(failed, 0) << failed << " of " << cases.size() << " cases differ";
}

TEST_F(Qwen3Tokenizer, DecodeCases) {
  const auto cases = test::load_json(test::data_path("tokenizers/qwen3/decode_cases.json"));
  ASSERT_EQ(cases.size(), 10u);
  for (const auto& c : cases) {
    const std::vector<int32_t> ids = c["ids"];
    const std::string want = c["text"];
    EXPECT_EQ(utf8::lossy(tok().decode(ids)), want) << "ids " << test::ids_str(ids);
  }
}

TEST_F(Qwen3Tokenizer, ChatCases) {
  const auto cases = test::load_json(test::data_path("tokenizers/qwen3/chat_cases.json"));
  ASSERT_EQ(cases.size(), 6u);
  // Rendered by the Jinja engine from the vocabulary's own template, as the server renders it.
  const chat::Template tmpl(tok().vocab().chat_template);
  for (const auto& c : cases) {
    nlohmann::ordered_json req = {{"messages", c["messages"]},
                                  {"add_generation_prompt", c["add_generation_prompt"]}};
    if (c.contains("enable_thinking"))
      req["chat_template_kwargs"] = {{"enable_thinking", c["enable_thinking"]}};
    const std::string want = c["text"];
    const std::string got = tmpl.render(chat::chat_template_context(
        req, "", "", chat::content_format_detect(tok().vocab().chat_template)));
    EXPECT_EQ(got, want) << c["name"];
    const std::vector<int32_t> want_ids = c["ids"];
    const std::string d = ids_diff(want_ids, tok().encode(got, true));
    EXPECT_TRUE(d.empty()) << c["name"] << ": " << d;
  }
}

TEST_F(Qwen3Tokenizer, RoundTripIsNfcOfInput) {
  const auto cases = test::load_json(test::data_path("tokenizers/qwen3/cases.json"));
  for (const auto& c : cases) {
    const std::string text = c["text"];
    const auto ids = tok().encode(text, true);
    EXPECT_EQ(tok().decode(ids), utf8::nfc(text)) << printable(text);
  }
}

TEST_F(Qwen3Tokenizer, SpecialTokensParsedOnlyOnRequest) {
  const std::string text = "<|im_start|>user\n<think>x</think><|im_end|>";
  const auto plain = tok().encode(text, false);
  const auto special = tok().encode(text, true);
  EXPECT_EQ(special.front(), 151644);
  EXPECT_EQ(special.back(), 151645);
  for (int32_t id : plain) {
    EXPECT_NE(id, 151644);
    EXPECT_NE(id, 151645);
  }
  // Non-special added tokens (<think>) are matched either way, as llama.cpp does.
  EXPECT_NE(std::find(plain.begin(), plain.end(), 151667), plain.end());
  EXPECT_EQ(tok().decode(plain), text);
  EXPECT_EQ(tok().decode(special), text);
}

TEST_F(Qwen3Tokenizer, InvalidUtf8IsAnErrorNamingTheOffset) {
  try {
    tok().encode(std::string("ok \xC3\x28", 5), false);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("byte offset 3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tok().decode(std::vector<int32_t>{151669}), Error);
  EXPECT_THROW(tok().decode(std::vector<int32_t>{-1}), Error);
}

TEST_F(Qwen3Tokenizer, LongRunsUseTheHeapPathAndRoundTrip) {
  for (const std::string& s : {std::string(100000, ' '), std::string(100000, 'a'),
                               std::string(20000, '\n') + "x", std::string(30000, '!')}) {
    const auto ids = tok().encode(s, false);
    EXPECT_LT(ids.size(), s.size());
    EXPECT_EQ(tok().decode(ids), s);
  }
}

// GPT-2's reference algorithm on strings: merge the lowest-ranked adjacent pair (all its
// occurrences, left to right) until none is left. Independent of the id-based merge loop.
std::vector<std::string> reference_bpe(
    const std::map<std::pair<std::string, std::string>, size_t>& ranks,
    std::vector<std::string> word) {
  while (word.size() > 1) {
    size_t best = SIZE_MAX;
    std::pair<std::string, std::string> best_pair;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      auto it = ranks.find({word[i], word[i + 1]});
      if (it != ranks.end() && it->second < best) {
        best = it->second;
        best_pair = it->first;
      }
    }
    if (best == SIZE_MAX) break;
    std::vector<std::string> next;
    for (size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == best_pair.first && word[i + 1] == best_pair.second) {
        next.push_back(word[i] + word[i + 1]);
        i += 2;
      } else {
        next.push_back(word[i++]);
      }
    }
    word = std::move(next);
  }
  return word;
}

TEST_F(Qwen3Tokenizer, MergeLoopMatchesReferenceBpeOnRandomWords) {
  // Only merges among ASCII letters are needed for lowercase words.
  std::map<std::pair<std::string, std::string>, size_t> ranks;
  const auto& merges = tok().vocab().merges;
  for (size_t r = 0; r < merges.size(); ++r) {
    const std::string& m = merges[r];
    const size_t sp = m.find(' ');
    const std::string a = m.substr(0, sp), b = m.substr(sp + 1);
    auto letters = [](const std::string& s) {
      for (char ch : s)
        if (ch < 'a' || ch > 'z') return false;
      return true;
    };
    if (letters(a) && letters(b)) ranks.emplace(std::make_pair(a, b), r);
  }
  std::mt19937 rng(7);
  const std::string alphabet = "aaabcdeeefghiiiklmnoopqrssttuvy";
  int long_words = 0;
  for (int t = 0; t < 400; ++t) {
    const size_t len = 1 + rng() % 48;
    std::string w;
    for (size_t i = 0; i < len; ++i) w.push_back(alphabet[rng() % alphabet.size()]);
    std::vector<std::string> chars;
    for (char ch : w) chars.emplace_back(1, ch);
    std::vector<int32_t> want;
    for (const auto& piece : reference_bpe(ranks, chars)) want.push_back(tok().token_id(piece));
    const std::string d = ids_diff(want, tok().encode(w, false));
    EXPECT_TRUE(d.empty()) << w << ": " << d;
    long_words += len > 16;
  }
  EXPECT_GT(long_words, 50);  // the heap path (words over 16 bytes) was exercised
}

TEST_F(Qwen3Tokenizer, EncodeIsThreadSafe) {
  const std::string text = "Árvíztűrő tükörfúrógép, 12345 <|im_end|> don't   stop\n\n";
  const auto want = tok().encode(text, true);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i)
        if (tok().encode(text, true) != want) ++bad;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace qwen3_cases_test
}  // namespace invar
