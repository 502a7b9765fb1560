// UTF-8 helpers the tokenizer needs at its edges: validation (encode refuses invalid input),
// lossy decoding with U+FFFD (decode and streaming), and NFC (the Qwen normaliser).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace invar::utf8 {

// Offset of the first byte that does not start a well-formed UTF-8 sequence (RFC 3629: no
// overlongs, no surrogates, nothing above U+10FFFF), or s.size() if s is valid.
size_t first_invalid(std::string_view s);

// s with each maximal ill-formed subsequence replaced by one U+FFFD ("substitution of maximal
// subparts", Unicode §3.9; what Rust's String::from_utf8_lossy and so HF tokenizers do).
std::string lossy(std::string_view s);

// Number of bytes at the end of s (0..3) that are a proper prefix of a well-formed sequence:
// what a streaming decoder must hold back until the next token arrives.
size_t incomplete_tail(std::string_view s);

// Canonical composition (NFC, not NFKC). s must be valid UTF-8.
std::string nfc(std::string_view s);
// True when NFC cannot change s: every code point is below U+0300, where no character
// decomposes, composes or reorders. Lets ASCII and Latin-1 text skip utf8proc.
bool nfc_trivially_stable(std::string_view s);

}  // namespace invar::utf8
