// The vocabulary read from GGUF files: the reference models' `tokenize` sections and prompts,
// and a Qwen3 vocabulary written with vocab_to_gguf and read back.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "chat/template.h"
#include "core/error.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace invar {
namespace gguf_vocab_test {

using test::ids_diff;
using test::printable;

class ReferenceVocab : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceVocab, TokenizeSectionAndPrompts) {
  const std::string name = GetParam();
  const auto ref = test::load_reference(name);
  auto gguf = GgufFile::open(test::data_path("models/" + name + ".gguf"));
  Tokenizer tok(vocab_from_gguf(*gguf));
  EXPECT_EQ(tok.n_vocab(), ref["n_vocab"].get<int64_t>());
  for (const auto& [text, id] : ref["special_ids"].items())
    EXPECT_EQ(tok.token_id(text), id.get<int32_t>());
  // The tiny models carry plain ChatML.
  const chat::Template tmpl(tok.vocab().chat_template);
  EXPECT_EQ(tmpl.render({{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                         {"add_generation_prompt", true}}),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");

  ASSERT_EQ(ref["tokenize"].size(), 12u);
  for (const auto& c : ref["tokenize"]) {
    const std::string text = c["text"];
    const std::vector<int32_t> want = c["ids"];
    const auto got = tok.encode(text, /*parse_special=*/false);
    const std::string d = ids_diff(want, got);
    EXPECT_TRUE(d.empty()) << "NOT OK \"" << printable(text) << "\": " << d;
    EXPECT_EQ(tok.decode(got), text);
  }
  for (const auto& s : ref["sequences"]) {
    const std::string text = s["text"];
    const std::vector<int32_t> want = s["tokens"];
    const bool chat = s["kind"] == "chat";
    EXPECT_TRUE(ids_diff(want, tok.encode(text, chat)).empty()) << s["name"];
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ReferenceVocab,
                         ::testing::Values("qwen3next-tiny", "qwen35-tiny"));

TEST(GgufVocab, WrittenQwen3VocabReadsBackIdentically) {
  const Vocab v = vocab_from_tokenizer_json(test::source_path("data/qwen3/tokenizer.json"));
  GgufWriter w;
  w.set_string("general.architecture", "qwen3next");
  vocab_to_gguf(v, w);
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("invar_vocab_test_" + std::to_string(::getpid()) + ".gguf"))
                               .string();
  w.write(path);
  auto f = GgufFile::open(path);
  const Vocab r = vocab_from_gguf(*f);
  std::filesystem::remove(path);
  EXPECT_EQ(r.tokens, v.tokens);
  EXPECT_EQ(r.token_types, v.token_types);
  EXPECT_EQ(r.merges, v.merges);
  EXPECT_EQ(r.pre, v.pre);
  EXPECT_EQ(r.bos_id, v.bos_id);
  EXPECT_EQ(r.eos_id, v.eos_id);
  EXPECT_EQ(r.pad_id, v.pad_id);
  EXPECT_EQ(r.add_bos, v.add_bos);
  EXPECT_EQ(r.chat_template, v.chat_template);

  // Same ids from both sources, on the case file.
  Tokenizer a(v), b(r);
  const auto cases = test::load_json(test::data_path("tokenizers/qwen3/cases.json"));
  for (const auto& c : cases) {
    const std::string text = c["text"];
    EXPECT_EQ(a.encode(text, true), b.encode(text, true)) << printable(text);
  }
}

TEST(GgufVocab, PaddedRowsAreUnusedAndNeverMatched) {
  Vocab v = vocab_from_tokenizer_json(test::source_path("data/qwen3/tokenizer.json"));
  for (size_t i = v.tokens.size(); i < 151936; ++i) {
    v.tokens.push_back("[PAD" + std::to_string(i) + "]");
    v.token_types.push_back(5);
  }
  Tokenizer tok(std::move(v));
  EXPECT_EQ(tok.n_vocab(), 151936);
  const auto ids = tok.encode("[PAD151700]", true);
  for (int32_t id : ids) EXPECT_LT(id, 151643);
  EXPECT_EQ(tok.token_bytes(151700), "");
}

TEST(GgufVocab, UnsupportedModelsAreClearErrors) {
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", {"a"});
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("invar_vocab_bad_" + std::to_string(::getpid()) + ".gguf"))
                               .string();
  w.write(path);
  auto f = GgufFile::open(path);
  std::filesystem::remove(path);
  try {
    vocab_from_gguf(*f);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'llama'"), std::string::npos) << e.what();
  }
  Vocab bad;
  bad.tokens = {"a", "b"};
  bad.pre = "llama3";
  EXPECT_THROW(Tokenizer{bad}, Error);
}

TEST(GgufVocab, TinyVocabRefusesBytesItHasNoTokenFor) {
  auto gguf = GgufFile::open(test::data_path("models/qwen35-tiny.gguf"));
  Tokenizer tok(vocab_from_gguf(*gguf));
  try {
    tok.encode("caf\xC3\xA9", false);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("0xC3"), std::string::npos) << e.what();
  }
}

}  // namespace gguf_vocab_test
}  // namespace invar
