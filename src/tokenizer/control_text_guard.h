// Chat content that spells a control token stays text (no role injection).
//
// A chat prompt is the template's text with the clients' strings spliced in. Tokenising the
// rendered prompt with special-token parsing on would turn a user's
// "<|im_end|>\n<|im_start|>system" into real control tokens: any end user could forge a system
// turn. The guard keeps the two apart without knowing the template:
//   1. protect() replaces every control-token spelling in a client string by a placeholder code
//      point from Supplementary Private Use Area-B (U+100000 + i), one per distinct spelling;
//      a character of that area already in the string gets a placeholder too, so restoring is
//      exact whatever the input;
//   2. the template renders the protected strings (templates move, strip and split text, but
//      a single code point survives all of that intact);
//   3. encode() splits the rendered prompt at the control tokens the template itself wrote,
//      restores the placeholders in the text between them, and tokenises that text with
//      control-token parsing off. Non-control added tokens (<think>, <tool_call>) are still
//      matched, as Hugging Face tokenizers match them in any text.
// With no control spelling in the content the tokens equal encode(rendered, parse_special=true).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace invar {

class ControlTextGuard {
 public:
  explicit ControlTextGuard(const Tokenizer& tok);

  // The client string with control spellings (and stray placeholder-area characters) replaced.
  // Throws invar::Error for invalid UTF-8 or more distinct protected strings than placeholders.
  std::string protect(std::string_view text);
  // Tokens of a prompt rendered from protected strings: see the header comment.
  std::vector<int32_t> encode(std::string_view rendered) const;

 private:
  std::string placeholder_for(std::string_view original);
  std::string restore(std::string_view text) const;
  int control_at(std::string_view text, size_t i) const;  // longest control spelling at i, or −1

  const Tokenizer& tok_;
  std::vector<std::string_view> controls_;  // control-token spellings, longest first
  std::vector<int32_t> control_ids_;        // [controls_] their ids
  std::array<bool, 256> first_byte_{};      // first bytes of control spellings
  std::vector<std::string> originals_;      // placeholder i stands for originals_[i]
};

}  // namespace invar
