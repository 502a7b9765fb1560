#include "core/utf8.h"

#include <cstdint>

namespace invar::utf8 {
namespace {

enum class Seq { complete, truncated, invalid };

// Scans the sequence starting at s[i] following Unicode Table 3-7 (well-formed byte sequences).
// `len` receives the bytes it covers: the whole character, or the maximal subpart that is a
// valid prefix (at least 1 byte) when the sequence is ill-formed or cut by the end of s.
Seq scan(std::string_view s, size_t i, size_t& len) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    len = 1;
    return Seq::complete;
  }
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlongs
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;  // no overlongs
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    len = 1;
    return Seq::invalid;
  }
  for (size_t k = 1; k < need; ++k) {
    if (i + k >= s.size()) {
      len = k;
      return Seq::truncated;
    }
    const auto b = static_cast<uint8_t>(s[i + k]);
    const uint8_t l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) {
      len = k;
      return Seq::invalid;
    }
  }
  len = need;
  return Seq::complete;
}

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

size_t first_invalid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // ASCII runs dominate real prompts: skip them 8 bytes at a time.
    while (i + 8 <= s.size()) {
      uint64_t w;
      __builtin_memcpy(&w, s.data() + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= s.size()) break;
    size_t len;
    if (scan(s, i, len) != Seq::complete) return i;
    i += len;
  }
  return s.size();
}

std::string lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t len;
    if (scan(s, i, len) == Seq::complete) {
      out.append(s.data() + i, len);
    } else {
      out.append(kReplacement);
    }
    i += len;
  }
  return out;
}

size_t incomplete_tail(std::string_view s) {
  // A proper prefix of a sequence is at most 3 bytes long: look back that far for a lead byte.
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const size_t i = s.size() - back;
    const auto b = static_cast<uint8_t>(s[i]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: the lead is further back
    size_t len;
    return scan(s, i, len) == Seq::truncated && i + len == s.size() ? back : 0;
  }
  return 0;
}

std::string release_complete(std::string& pending, size_t n) {
  n = complete_prefix(std::string_view(pending).substr(0, n));
  std::string out = lossy(std::string_view(pending).substr(0, n));
  pending.erase(0, n);
  return out;
}

std::string release_all(std::string& pending) {
  std::string out = lossy(pending);
  pending.clear();
  return out;
}

}  // namespace invar::utf8
