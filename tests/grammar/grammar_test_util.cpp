#include "grammar_test_util.h"

#include <algorithm>
#include <bit>

#include "tokenizer/tokenizer.h"

namespace invar::grammar::test {

SyntheticVocab synthetic_vocab() {
  std::vector<std::string> t;
  for (int b = 0; b < 256; ++b) t.push_back(std::string(1, static_cast<char>(b)));
  for (const char* s : {"{\"",
                        "\":",
                        "\",",
                        "\"}",
                        "\"]",
                        "[\"",
                        "true",
                        "false",
                        "null",
                        "12",
                        "00",
                        "-1",
                        ".5",
                        "e+",
                        "ab",
                        "abc",
                        "name",
                        "\"name\":",
                        "},",
                        "}]",
                        "]}",
                        "\\n",
                        "\\u00",
                        "\xC3\xA9",
                        "\xE6\x97\xA5\xE6\x9C\xAC",
                        "\xF0\x9F\x98\x80",
                        "\xC3",
                        "\xA9\"",
                        "2024-",
                        "-01",
                        "T12:",
                        ":00",
                        "Z\"",
                        "@ex",
                        "ample",
                        ".com",
                        "aaaa",
                        " ",
                        "  ",
                        "\n",
                        "0000",
                        "ffff"}) {
    t.push_back(s);
  }
  const int32_t eos = static_cast<int32_t>(t.size());
  t.push_back("");
  const int32_t control = static_cast<int32_t>(t.size());
  t.push_back("");
  return {std::make_shared<const Vocabulary>(std::move(t), std::vector<int32_t>{eos}), eos,
          control};
}

std::shared_ptr<const Vocabulary> qwen3_vocab() {
  static std::shared_ptr<const Vocabulary> v = [] {
    auto tok = Tokenizer::from_file(std::string(INVAR_SOURCE_DIR) + "/data/qwen3/tokenizer.json");
    const auto& vocab = tok->vocab();
    std::vector<std::string> bytes(static_cast<size_t>(tok->n_vocab()));
    std::vector<int32_t> eos;
    for (int64_t id = 0; id < tok->n_vocab(); ++id) {
      const bool control =
          static_cast<size_t>(id) < vocab.token_types.size() && vocab.token_types[id] == 3;
      if (!control) bytes[id] = tok->token_bytes(static_cast<int32_t>(id));
    }
    for (const char* s : {"<|im_end|>", "<|endoftext|>"}) {
      const int32_t id = tok->token_id(s);
      if (id >= 0) {
        eos.push_back(id);
        bytes[id].clear();
      }
    }
    return std::make_shared<const Vocabulary>(std::move(bytes), std::move(eos));
  }();
  return v;
}

bool full_match(const std::shared_ptr<const Grammar>& g, const std::string& s) {
  static auto v = synthetic_vocab().vocab;
  Matcher m(g, v);
  return m.accept_bytes(s) && m.is_accepting();
}

// Set bits word by word, counted first: on Qwen3's 151k-token vocabulary a bit-by-bit loop growing
// the vector was most of the schema corpus test's time under ASan.
namespace {

// Word w of a mask over n tokens, bits past n cleared (they are not tokens).
uint64_t mask_word(const std::vector<uint64_t>& words, size_t w, size_t n) {
  if (64 * w >= n) return 0;
  const size_t tail = n - 64 * w;
  return tail >= 64 ? words[w] : words[w] & ((uint64_t(1) << tail) - 1);
}

}  // namespace

std::vector<int32_t> mask_ids(const std::vector<uint64_t>& words, size_t n) {
  const size_t n_words = (n + 63) / 64;
  auto word = [&](size_t w) { return mask_word(words, w, n); };
  size_t count = 0;
  for (size_t w = 0; w < n_words; ++w) count += size_t(std::popcount(word(w)));
  std::vector<int32_t> out;
  out.reserve(count);
  for (size_t w = 0; w < n_words; ++w) {
    for (uint64_t bits = word(w); bits != 0; bits &= bits - 1)
      out.push_back(static_cast<int32_t>(64 * w + size_t(std::countr_zero(bits))));
  }
  return out;
}

std::string random_walk(Matcher& m, const Vocabulary& v, std::mt19937_64& rng, int free_tokens,
                        size_t max_bytes, bool& ok) {
  std::string out;
  ok = false;
  for (int i = 0; i < free_tokens && out.size() < max_bytes; ++i) {
    // The r-th allowed id, r uniform over the allowed count: the draw mask_ids' list would give,
    // without listing the (often ~150k) allowed ids at every step.
    const std::vector<uint64_t>& words = m.mask();
    size_t count = 0;
    for (size_t w = 0; w < words.size(); ++w)
      count += size_t(std::popcount(mask_word(words, w, v.size())));
    if (count == 0) return out;
    size_t r = std::uniform_int_distribution<size_t>(0, count - 1)(rng);
    size_t w = 0;
    for (uint64_t bits = 0;; ++w) {
      bits = mask_word(words, w, v.size());
      const size_t c = size_t(std::popcount(bits));
      if (r < c) break;
      r -= c;
    }
    uint64_t bits = mask_word(words, w, v.size());
    for (; r > 0; --r) bits &= bits - 1;
    const int32_t id = static_cast<int32_t>(64 * w + size_t(std::countr_zero(bits)));
    if (!m.accept_token(id)) return out;
    if (m.is_terminated()) {
      ok = true;
      return out;
    }
    out += v.token(id);
  }
  // Finishing: the shortest completion.
  if (auto rest = m.shortest_completion(); rest && m.accept_bytes(*rest)) {
    out += *rest;
    ok = m.is_accepting();
  }
  return out;
}

}  // namespace invar::grammar::test
