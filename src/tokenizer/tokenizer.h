// Byte-level BPE as Qwen uses it (tokenizer.ggml.model = gpt2, pre = qwen2 / qwen35):
// special tokens matched first, NFC, the Qwen split regex, byte→unicode mapping, merges by rank.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"

namespace invar {

// The vocabulary as stored in a GGUF or a Hugging Face tokenizer.json.
struct Vocab {
  std::vector<std::string> tokens;   // [V] byte-level (GPT-2 unicode-mapped) strings
  std::vector<std::string> merges;   // "a b", rank = index
  std::vector<int32_t> token_types;  // [V] 1 normal, 3 control, 4 user-defined, 6 byte
  std::string pre = "qwen2";         // pre-tokenizer name (qwen2, qwen35)
  int32_t bos_id = -1, eos_id = -1, pad_id = -1;
  int32_t eot_id = -1, eom_id = -1;  // end of turn, end of message (GGUF only; -1: none)
  bool add_bos = false;
  std::string chat_template;  // tokenizer.chat_template, may be empty
  // What the reader went past where llama.cpp warns and runs (a special id outside the
  // vocabulary, a missing pre-tokenizer name): the loader prints them.
  std::vector<std::string> warnings;
};

// tokenizer.json (+ tokenizer_config.json beside it, if present, for eos/bos/chat template).
Vocab vocab_from_tokenizer_json(const std::string& path);
Vocab vocab_from_gguf(const GgufFile& f);
// Writes the tokenizer.ggml.* keys llama.cpp reads.
void vocab_to_gguf(const Vocab& v, GgufWriter& w);

class Tokenizer {
 public:
  explicit Tokenizer(Vocab v);
  ~Tokenizer();
  static std::unique_ptr<Tokenizer> from_file(const std::string& path);  // .gguf or tokenizer.json

  // parse_special: text like "<|im_start|>" becomes its special token id.
  std::vector<int32_t> encode(std::string_view text, bool parse_special) const;
  // Concatenated raw bytes of the tokens (may end in a partial UTF-8 sequence).
  std::string decode(std::span<const int32_t> ids) const;
  const std::string& token_bytes(int32_t id) const;  // raw bytes of one token
  int64_t n_vocab() const;
  const Vocab& vocab() const;
  int32_t token_id(std::string_view token_text) const;  // -1 if absent (exact vocab string)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Streaming detokenisation: never emits a partial UTF-8 character; bytes that cannot start or
// continue a valid sequence are emitted as U+FFFD.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok) : tok_(tok) {}
  std::string push(int32_t id);  // returns the newly completed text
  std::string flush();           // whatever is held back, invalid bytes as U+FFFD
 private:
  const Tokenizer& tok_;
  std::string pending_;
};

}  // namespace invar
