#include "tokenizer/byte_level.h"

#include <array>

namespace invar::byte_level {
namespace {

struct Tables {
  std::array<std::string, 256> byte_to_text;  // [256] UTF-8 of the stand-in code point
  std::array<int16_t, 324> cp_to_byte;        // [U+0000..U+0143] -> byte, -1 if not a stand-in
  Tables() {
    cp_to_byte.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const int cp = printable ? b : next++;
      cp_to_byte[cp] = static_cast<int16_t>(b);
      std::string& s = byte_to_text[b];
      if (cp < 0x80) {
        s.push_back(static_cast<char>(cp));
      } else {
        s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      }
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::string& encode_byte(uint8_t b) {
  return tables().byte_to_text[b];
}

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += encode_byte(static_cast<uint8_t>(c));
  return out;
}

std::optional<std::string> decode(std::string_view text) {
  const Tables& t = tables();
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto b0 = static_cast<uint8_t>(text[i]);
    int cp;
    if (b0 < 0x80) {
      cp = b0;
      i += 1;
    } else if ((b0 & 0xE0) == 0xC0 && i + 1 < text.size()) {
      cp = ((b0 & 0x1F) << 6) | (static_cast<uint8_t>(text[i + 1]) & 0x3F);
      i += 2;
    } else {
      return std::nullopt;  // 3- and 4-byte code points are all above U+0143
    }
    if (cp >= static_cast<int>(t.cp_to_byte.size()) || t.cp_to_byte[cp] < 0) return std::nullopt;
    out.push_back(static_cast<char>(t.cp_to_byte[cp]));
  }
  return out;
}

}  // namespace invar::byte_level
