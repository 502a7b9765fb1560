// GPT-2's byte-level alphabet (bytes_to_unicode): every byte maps to one printable code point,
// so a vocabulary of strings can hold arbitrary bytes. Bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF
// map to themselves; the other 68 map, in byte order, to U+0100..U+0143 (space -> 'Ġ' U+0120,
// '\n' -> 'Ċ' U+010A).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace invar::byte_level {

// UTF-8 of the code point that stands for byte b.
const std::string& encode_byte(uint8_t b);
// The byte-level string of raw bytes.
std::string encode(std::string_view bytes);
// Raw bytes of a byte-level string; nullopt if it holds a code point outside the alphabet.
std::optional<std::string> decode(std::string_view text);

}  // namespace invar::byte_level
