// UTF-8 well-formedness (Unicode Table 3-7): validation, lossy decoding with U+FFFD, and the
// hold-back a stream of byte-level tokens needs so that it never releases half a character.
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

// Length of the longest prefix of s that does not end inside an unfinished character.
inline size_t complete_prefix(std::string_view s) {
  return s.size() - incomplete_tail(s);
}

// The hold-back of streamed text, which never releases half a character: removes from the
// front of `pending` the longest prefix of its first n bytes that ends on a character
// boundary and returns it as text (ill-formed bytes as U+FFFD).
std::string release_complete(std::string& pending, size_t n);
// The end of a stream: all of `pending` as text, an unfinished character as U+FFFD.
std::string release_all(std::string& pending);

}  // namespace invar::utf8
