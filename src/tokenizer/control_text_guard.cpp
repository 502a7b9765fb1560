#include "tokenizer/control_text_guard.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/token_types.h"
#include "tokenizer/utf8.h"

namespace invar {
namespace {

constexpr uint32_t kPlaceholderBase = 0x100000;  // Supplementary Private Use Area-B
constexpr uint32_t kPlaceholderCount = 0xFFFE;   // U+100000..U+10FFFD

// Bytes of a code point in U+100000..U+10FFFF start F4 80..8F.
bool placeholder_area_at(std::string_view s, size_t i) {
  return i + 4 <= s.size() && static_cast<uint8_t>(s[i]) == 0xF4 &&
         (static_cast<uint8_t>(s[i + 1]) & 0xF0) == 0x80;
}

uint32_t code_point_at(std::string_view s, size_t i) {  // a 4-byte sequence starting F4
  return (uint32_t(uint8_t(s[i]) & 0x07) << 18) | (uint32_t(uint8_t(s[i + 1]) & 0x3F) << 12) |
         (uint32_t(uint8_t(s[i + 2]) & 0x3F) << 6) | uint32_t(uint8_t(s[i + 3]) & 0x3F);
}

std::string utf8_of(uint32_t cp) {  // cp in U+100000..U+10FFFF
  return {char(0xF0 | (cp >> 18)), char(0x80 | ((cp >> 12) & 0x3F)),
          char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
}

}  // namespace

int ControlTextGuard::control_at(std::string_view text, size_t i) const {
  if (!first_byte_[static_cast<uint8_t>(text[i])]) return -1;
  for (size_t k = 0; k < controls_.size(); ++k)
    if (text.compare(i, controls_[k].size(), controls_[k]) == 0) return static_cast<int>(k);
  return -1;
}

ControlTextGuard::ControlTextGuard(const Tokenizer& tok) : tok_(tok) {
  const Vocab& v = tok.vocab();
  std::vector<int32_t> ids;
  for (size_t i = 0; i < v.tokens.size(); ++i)
    if (i < v.token_types.size() && v.token_types[i] == token_type::kControl &&
        !v.tokens[i].empty())
      ids.push_back(static_cast<int32_t>(i));
  // Longest first, so a match is leftmost-longest as the tokenizer's own added-token scan.
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return v.tokens[size_t(a)].size() > v.tokens[size_t(b)].size();
  });
  for (int32_t id : ids) {
    controls_.push_back(v.tokens[size_t(id)]);
    first_byte_[static_cast<uint8_t>(v.tokens[size_t(id)][0])] = true;
    control_ids_.push_back(id);
  }
}

std::string ControlTextGuard::placeholder_for(std::string_view original) {
  size_t i = 0;
  while (i < originals_.size() && originals_[i] != original) ++i;
  if (i == originals_.size()) {
    if (i >= kPlaceholderCount)
      throw Error("chat content holds too many distinct special-token spellings");
    originals_.emplace_back(original);
  }
  return utf8_of(kPlaceholderBase + static_cast<uint32_t>(i));
}

std::string ControlTextGuard::protect(std::string_view text) {
  const size_t bad = utf8::first_invalid(text);
  if (bad != text.size())
    throw Error("chat content is not valid UTF-8 (byte offset " + std::to_string(bad) + ")");
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (const int k = control_at(text, i); k >= 0) {
      out += placeholder_for(controls_[size_t(k)]);
      i += controls_[size_t(k)].size();
    } else if (placeholder_area_at(text, i)) {
      out += placeholder_for(text.substr(i, 4));
      i += 4;
    } else {
      out += text[i++];
    }
  }
  return out;
}

std::string ControlTextGuard::restore(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (placeholder_area_at(text, i)) {
      const uint32_t index = code_point_at(text, i) - kPlaceholderBase;
      if (index < originals_.size()) {
        out += originals_[index];
        i += 4;
        continue;
      }
    }
    out += text[i++];
  }
  return out;
}

std::vector<int32_t> ControlTextGuard::encode(std::string_view rendered) const {
  std::vector<int32_t> out;
  size_t seg = 0;
  auto flush = [&](size_t end) {
    if (end == seg) return;
    const std::vector<int32_t> ids = tok_.encode(restore(rendered.substr(seg, end - seg)), false);
    out.insert(out.end(), ids.begin(), ids.end());
  };
  for (size_t i = 0; i < rendered.size();) {
    const int k = control_at(rendered, i);
    if (k < 0) {
      ++i;
      continue;
    }
    flush(i);
    out.push_back(control_ids_[size_t(k)]);
    i += controls_[size_t(k)].size();
    seg = i;
  }
  flush(rendered.size());
  return out;
}

}  // namespace invar
