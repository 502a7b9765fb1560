// Helpers of the grammar tests: full-match checks, vocabularies (a synthetic one and the real
// Qwen3 one from data/qwen3/tokenizer.json), and a seeded random walk of a matcher.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/compile.h"
#include "grammar/matcher.h"
#include "grammar/vocabulary.h"

namespace invar::grammar::test {

// 256 single-byte tokens (ids 0..255), then multi-byte tokens, then two specials with no bytes:
// an end-of-sequence id (eos) and a control id that a mask must never allow.
struct SyntheticVocab {
  std::shared_ptr<const Vocabulary> vocab;
  int32_t eos, control;
};
SyntheticVocab synthetic_vocab();

// The Qwen3 vocabulary (151,669 ids incl. specials): control tokens have no bytes; eos is
// <|im_end|> and <|endoftext|>.
std::shared_ptr<const Vocabulary> qwen3_vocab();

// True when the whole of s is a sentence of the grammar.
bool full_match(const std::shared_ptr<const Grammar>& g, const std::string& s);

// Allowed token ids of a mask.
std::vector<int32_t> mask_ids(const std::vector<uint64_t>& words, size_t n);

// A seeded walk: `free_tokens` random allowed tokens (end-of-sequence allowed only once the
// output is at least `min_free` tokens), then Matcher::shortest_completion. Returns the bytes; `ok`
// false when no accepting end was reached within max_bytes.
std::string random_walk(Matcher& m, const Vocabulary& v, std::mt19937_64& rng, int free_tokens,
                        size_t max_bytes, bool& ok);

}  // namespace invar::grammar::test
