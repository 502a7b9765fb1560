#include "grammar_test_util.h"

#include <algorithm>

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

std::vector<int32_t> mask_ids(const std::vector<uint64_t>& words, size_t n) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < n; ++i) {
    if ((words[i >> 6] >> (i & 63)) & 1) out.push_back(static_cast<int32_t>(i));
  }
  return out;
}

std::string random_walk(Matcher& m, const Vocabulary& v, std::mt19937_64& rng, int free_tokens,
                        size_t max_bytes, bool& ok) {
  std::string out;
  ok = false;
  for (int i = 0; i < free_tokens && out.size() < max_bytes; ++i) {
    auto ids = mask_ids(m.mask(), v.size());
    if (ids.empty()) return out;
    const int32_t id = ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)];
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
