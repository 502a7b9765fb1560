// The pre-tokenizer: the split regex of Qwen's tokenizer.json (behaviour "Isolated"), compiled
// with PCRE2 (UTF + UCP, JIT). Every match becomes one pre-token; BPE never merges across them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace invar {

// The patterns as Hugging Face tokenizer.json files spell them (Oniguruma syntax).
// qwen2 (Qwen2/2.5/3, Qwen3-Next):
inline constexpr std::string_view kQwen2SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// qwen35 (Qwen3.5): marks join letter runs.
inline constexpr std::string_view kQwen35SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The pre-tokenizer name ("qwen2", "qwen35") whose pattern is `pattern`, or "" if none is.
std::string pre_name_for_pattern(std::string_view pattern);

class PreSplitter {
 public:
  // pre: "qwen2" or "qwen35"; throws invar::Error for any other name.
  explicit PreSplitter(const std::string& pre);
  ~PreSplitter();
  PreSplitter(const PreSplitter&) = delete;
  PreSplitter& operator=(const PreSplitter&) = delete;

  // Appends [begin, end) byte ranges of the pre-tokens of `text` (valid UTF-8) to `out`,
  // in order; together they cover the text. Thread-safe.
  void split(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& out) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace invar
