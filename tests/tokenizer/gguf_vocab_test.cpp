// The vocabulary read from GGUF files: the reference models' `tokenize` sections and prompts,
// and a Qwen3 vocabulary written with vocab_to_gguf and read back.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>

#include "chat/template.h"
#include "core/error.h"
#include "test_support.h"
#include "tokenizer/end_of_sequence.h"
#include "tokenizer/token_types.h"
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

namespace {

// `v` written as a GGUF file with `arch` (and `extra` keys), read back.
Vocab vocab_round_trip(const Vocab& v, const std::string& arch,
                       const std::function<void(GgufWriter&)>& extra = {}) {
  GgufWriter w;
  w.set_string("general.architecture", arch);
  vocab_to_gguf(v, w);
  if (extra) extra(w);
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("invar_vocab_eog_" + std::to_string(::getpid()) + ".gguf"))
                               .string();
  w.write(path);
  auto f = GgufFile::open(path);
  std::filesystem::remove(path);
  return vocab_from_gguf(*f);
}

bool has(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

// The end-of-generation set llama.cpp builds: the file's eot and eom ids, and the FIM tokens
// (added, user-defined in Qwen's vocabulary); a plain-text token spelled like an end ("</s>" in
// Qwen's BPE vocabulary) stays text.
TEST(GgufVocab, EndOfGenerationSetIsLlamaCppsControlTokens) {
  Vocab v = vocab_from_tokenizer_json(test::source_path("data/qwen3/tokenizer.json"));
  Tokenizer plain(v);
  const int32_t fim_pad = plain.token_id("<|fim_pad|>"), repo = plain.token_id("<|repo_name|>"),
                file_sep = plain.token_id("<|file_sep|>"), html_end = plain.token_id("</s>");
  ASSERT_GE(fim_pad, 0);
  ASSERT_GE(html_end, 0);
  ASSERT_EQ(v.token_types[size_t(html_end)], token_type::kNormal);
  const int32_t eot = plain.token_id("<|im_start|>");  // any control id stands for the file's eot
  v.eot_id = eot;
  const Vocab r = vocab_round_trip(v, "qwen3next");
  EXPECT_EQ(r.eot_id, eot) << "tokenizer.ggml.eot_token_id not written or read";
  EXPECT_TRUE(r.warnings.empty());
  Tokenizer tok(r);
  const std::vector<int32_t> ids = end_of_sequence_ids(tok);
  EXPECT_TRUE(has(ids, tok.token_id("<|im_end|>")));
  EXPECT_TRUE(has(ids, tok.token_id("<|endoftext|>")));
  EXPECT_TRUE(has(ids, eot));
  EXPECT_TRUE(has(ids, fim_pad));
  EXPECT_TRUE(has(ids, repo));
  EXPECT_TRUE(has(ids, file_sep));
  EXPECT_FALSE(has(ids, html_end)) << "plain text '</s>' would end completions";
  std::vector<int32_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end()) << "an id listed twice";
}

// Where llama.cpp warns and runs, invar does too: a special id outside the vocabulary is no
// token; a missing pre-tokenizer name on a Qwen3 architecture is the one its converter writes.
TEST(GgufVocab, OutOfRangeIdsAndMissingPreAreWarnings) {
  const Vocab v = vocab_from_tokenizer_json(test::source_path("data/qwen3/tokenizer.json"));
  const Vocab r = vocab_round_trip(
      v, "qwen35moe", [&](GgufWriter& w) { w.set_u32("tokenizer.ggml.eom_token_id", 900000); });
  EXPECT_EQ(r.eom_id, -1);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("tokenizer.ggml.eom_token_id = 900000"), std::string::npos)
      << r.warnings[0];

  Vocab no_pre = v;
  no_pre.pre = "";  // vocab_to_gguf writes an empty name: read as missing
  for (const auto& [arch, pre] : std::vector<std::pair<std::string, std::string>>{
           {"qwen35", "qwen35"}, {"qwen35moe", "qwen35"}, {"qwen3next", "qwen2"}}) {
    const Vocab n = vocab_round_trip(no_pre, arch);
    EXPECT_EQ(n.pre, pre) << arch;
    ASSERT_EQ(n.warnings.size(), 1u) << arch;
    EXPECT_NE(n.warnings[0].find("tokenizer.ggml.pre is missing"), std::string::npos);
  }
  EXPECT_EQ(vocab_round_trip(no_pre, "llama").pre, "default") << "only Qwen3 archs are named";
}

}  // namespace gguf_vocab_test
}  // namespace invar
