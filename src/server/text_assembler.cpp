#include "server/text_assembler.h"

#include <algorithm>

namespace invar::server {
namespace {

// Expected length of a sequence starting with lead byte c, 0 if c cannot start one.
int utf8_len(unsigned char c) {
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;
}

// Whether byte b may follow at offset k (≥ 1) of a sequence led by c (Unicode Table 3-7).
bool utf8_cont_ok(unsigned char c, int k, unsigned char b) {
  if (k == 1) {
    if (c == 0xE0) return b >= 0xA0 && b <= 0xBF;
    if (c == 0xED) return b >= 0x80 && b <= 0x9F;
    if (c == 0xF0) return b >= 0x90 && b <= 0xBF;
    if (c == 0xF4) return b >= 0x80 && b <= 0x8F;
  }
  return b >= 0x80 && b <= 0xBF;
}

// Number of bytes of the well-formed prefix of the sequence at s[i] (its full length when
// complete and valid); sets *complete.
int utf8_scan(std::string_view s, size_t i, bool* complete) {
  unsigned char c = s[i];
  int n = utf8_len(c);
  if (n == 0) {
    *complete = false;
    return 0;
  }
  int k = 1;
  while (k < n && i + k < s.size() && utf8_cont_ok(c, k, s[i + k])) ++k;
  *complete = (k == n);
  return k;
}

}  // namespace

std::string utf8_sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    bool complete = false;
    int k = utf8_scan(s, i, &complete);
    if (complete) {
      out.append(s.substr(i, k));
      i += k;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD for the maximal ill-formed subpart
      i += std::max(k, 1);
    }
  }
  return out;
}

size_t utf8_complete_prefix(std::string_view s) {
  // Only the last ≤ 3 bytes can belong to an unfinished character.
  size_t start = s.size() >= 3 ? s.size() - 3 : 0;
  for (size_t i = start; i < s.size(); ++i) {
    bool complete = false;
    int k = utf8_scan(s, i, &complete);
    if (!complete && k > 0 && i + k == s.size()) return i;
  }
  return s.size();
}

TextAssembler::TextAssembler(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (auto& s : stops_) max_stop_ = std::max(max_stop_, s.size());
}

std::string TextAssembler::push(std::string_view token_bytes) {
  if (stopped_) return "";
  pending_.append(token_bytes);
  size_t hit = std::string::npos;
  for (auto& s : stops_) hit = std::min(hit, pending_.find(s));
  if (hit != std::string::npos) {
    stopped_ = true;
    std::string out = utf8_sanitize(std::string_view(pending_).substr(0, hit));
    pending_.clear();
    return out;
  }
  // Keep the last max_stop − 1 bytes: they may be the start of a stop string.
  size_t keep = max_stop_ > 0 ? max_stop_ - 1 : 0;
  size_t n = pending_.size() > keep ? pending_.size() - keep : 0;
  n = utf8_complete_prefix(std::string_view(pending_).substr(0, n));
  std::string out = utf8_sanitize(std::string_view(pending_).substr(0, n));
  pending_.erase(0, n);
  return out;
}

std::string TextAssembler::finish() {
  std::string out = utf8_sanitize(pending_);
  pending_.clear();
  return out;
}

}  // namespace invar::server
