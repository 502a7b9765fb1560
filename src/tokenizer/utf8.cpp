#include "tokenizer/utf8.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "core/error.h"

namespace invar::utf8 {

bool nfc_trivially_stable(std::string_view s) {
  // Lead bytes 0xCC and above start code points >= U+0300; continuation bytes are < 0xC0.
  for (char c : s)
    if (static_cast<uint8_t>(c) >= 0xCC) return false;
  return true;
}

namespace {

void nfc_append(std::string_view s, std::string& out) {
  utf8proc_uint8_t* buf = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(
      reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()),
      &buf, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) {
    throw Error(std::string("tokenizer: NFC normalisation failed: ") + utf8proc_errmsg(n));
  }
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> hold(buf, &std::free);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

bool is_ascii(char c) {
  return static_cast<uint8_t>(c) < 0x80;
}

}  // namespace

std::string nfc(std::string_view s) {
  // NFC is local: cutting the text right before an ASCII character never changes it (ASCII is
  // a starter, NFC-stable, and never the second half of a composition; the cut only blocks
  // reordering and composition that a starter blocks anyway). So only the stretch from the
  // last ASCII character before a code point >= U+0300 up to the next ASCII character goes
  // through utf8proc; the rest is copied.
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    while (j < s.size() && static_cast<uint8_t>(s[j]) < 0xCC) ++j;
    if (j == s.size()) {
      out.append(s.substr(i));
      break;
    }
    size_t start = j;
    while (start > i && !is_ascii(s[start - 1])) --start;
    if (start > i) --start;  // include the ASCII base a mark may compose with
    size_t end = j;
    while (end < s.size() && !is_ascii(s[end])) ++end;
    out.append(s.substr(i, start - i));
    nfc_append(s.substr(start, end - start), out);
    i = end;
  }
  return out;
}

}  // namespace invar::utf8
