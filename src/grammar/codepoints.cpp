#include "grammar/codepoints.h"

#include <algorithm>
#include <cstdio>

#include "grammar/error.h"

namespace invar::grammar {

namespace {
constexpr uint32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;
}

void CodepointSet::add(uint32_t lo, uint32_t hi) {
  if (hi > kMaxCodepoint) hi = kMaxCodepoint;
  if (lo > hi) return;
  // Surrogates are not scalar values: UTF-8 cannot encode them.
  if (lo < kSurrogateLo && hi > kSurrogateHi) {
    ranges_.push_back({lo, kSurrogateLo - 1});
    ranges_.push_back({kSurrogateHi + 1, hi});
  } else if (lo >= kSurrogateLo && hi <= kSurrogateHi) {
    return;
  } else if (lo >= kSurrogateLo && lo <= kSurrogateHi) {
    ranges_.push_back({kSurrogateHi + 1, hi});
  } else if (hi >= kSurrogateLo && hi <= kSurrogateHi) {
    ranges_.push_back({lo, kSurrogateLo - 1});
  } else {
    ranges_.push_back({lo, hi});
  }
  normalize();
}

void CodepointSet::add(const CodepointSet& o) {
  ranges_.insert(ranges_.end(), o.ranges_.begin(), o.ranges_.end());
  normalize();
}

void CodepointSet::normalize() {
  std::sort(ranges_.begin(), ranges_.end());
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (const auto& r : ranges_) {
    if (!out.empty() && r.first <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, r.second);
    } else {
      out.push_back(r);
    }
  }
  ranges_ = std::move(out);
}

CodepointSet CodepointSet::complement() const {
  CodepointSet c;
  uint32_t next = 0;
  for (const auto& r : ranges_) {
    if (r.first > next) c.ranges_.push_back({next, r.first - 1});
    next = r.second + 1;
  }
  if (next <= kMaxCodepoint) c.ranges_.push_back({next, kMaxCodepoint});
  CodepointSet out;
  for (const auto& r : c.ranges_) out.add(r.first, r.second);  // drops surrogates
  return out;
}

CodepointSet CodepointSet::intersect(const CodepointSet& o) const {
  CodepointSet out;
  for (const auto& a : ranges_) {
    for (const auto& b : o.ranges_) {
      const uint32_t lo = std::max(a.first, b.first), hi = std::min(a.second, b.second);
      if (lo <= hi) out.ranges_.push_back({lo, hi});
    }
  }
  out.normalize();
  return out;
}

bool CodepointSet::contains(uint32_t cp) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), std::make_pair(cp, kMaxCodepoint + 1));
  return it != ranges_.begin() && std::prev(it)->second >= cp;
}

CodepointSet CodepointSet::all() {
  CodepointSet s;
  s.add(0, kMaxCodepoint);
  return s;
}

CodepointSet CodepointSet::ascii() {
  CodepointSet s;
  s.add(0, 0x7F);
  return s;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

uint32_t decode_utf8(std::string_view s, size_t& i, const char* what) {
  auto bad = [&]() {
    throw Error(std::string(what) + ": ill-formed UTF-8 at byte " + std::to_string(i));
  };
  const uint8_t c = static_cast<uint8_t>(s[i]);
  int n;
  uint32_t cp, min;
  if (c < 0x80) {
    ++i;
    return c;
  } else if ((c & 0xE0) == 0xC0) {
    n = 1, cp = c & 0x1F, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    n = 2, cp = c & 0x0F, min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    n = 3, cp = c & 0x07, min = 0x10000;
  } else {
    bad();
  }
  for (int k = 1; k <= n; ++k) {
    if (i + k >= s.size()) bad();
    const uint8_t d = static_cast<uint8_t>(s[i + k]);
    if ((d & 0xC0) != 0x80) bad();
    cp = (cp << 6) | (d & 0x3F);
  }
  if (cp < min || cp > kMaxCodepoint || (cp >= kSurrogateLo && cp <= kSurrogateHi)) bad();
  i += n + 1;
  return cp;
}

namespace {

int utf8_len(uint32_t cp) {
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

// Splits [lo, hi] (one encoded length) into pieces whose UTF-8 forms are a range per byte
// (the construction of Russ Cox's RE2 / Rust's utf8-ranges).
void split_range(uint32_t lo, uint32_t hi, std::vector<std::pair<uint32_t, uint32_t>>& out) {
  const int n = utf8_len(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_range(lo, lo | m, out);
        split_range((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_range(lo, (hi & ~m) - 1, out);
        split_range(hi & ~m, hi, out);
        return;
      }
    }
  }
  out.push_back({lo, hi});
}

}  // namespace

ExprId utf8_expr(Builder& b, const CodepointSet& s) {
  ByteSet ascii;
  std::vector<ExprId> alts;
  // Code points lo..hi of one encoded length (2 to 4 bytes): one byte range per position.
  auto multibyte = [&](uint32_t lo, uint32_t hi) {
    std::vector<std::pair<uint32_t, uint32_t>> pieces;
    split_range(lo, hi, pieces);
    for (auto [a, z] : pieces) {
      std::string ea, ez;
      append_utf8(ea, a);
      append_utf8(ez, z);
      std::vector<ExprId> seq;
      for (size_t k = 0; k < ea.size(); ++k) {
        ByteSet bs;
        bs.add_range(static_cast<uint8_t>(ea[k]), static_cast<uint8_t>(ez[k]));
        seq.push_back(b.bytes(bs));
      }
      alts.push_back(b.seq(std::move(seq)));
    }
  };
  for (auto [lo, hi] : s.ranges()) {
    for (uint32_t edge : {0x7Fu, 0x7FFu, 0xFFFFu}) {  // cut at the encoded-length boundaries
      if (lo <= edge && hi > edge) {
        if (edge == 0x7F) {
          ascii.add_range(static_cast<uint8_t>(lo), 0x7F);
        } else {
          multibyte(lo, edge);
        }
        lo = edge + 1;
      }
    }
    if (hi <= 0x7F) {
      ascii.add_range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi));
    } else {
      multibyte(lo, hi);
    }
  }
  if (!ascii.empty()) alts.insert(alts.begin(), b.bytes(ascii));
  return b.alt(std::move(alts));
}

namespace {

std::string json_escape_cp(uint32_t cp) {
  switch (cp) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      break;
  }
  char buf[8];
  std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
  return buf;
}

bool json_special(uint32_t cp) {
  return cp < 0x20 || cp == '"' || cp == '\\';
}

}  // namespace

ExprId json_char_expr(Builder& b, const CodepointSet& s) {
  CodepointSet special;
  special.add(0, 0x1F);
  special.add('"');
  special.add('\\');
  const CodepointSet raw = s.intersect(special.complement());
  std::vector<ExprId> alts;
  if (!raw.empty()) alts.push_back(utf8_expr(b, raw));
  const CodepointSet escaped = s.intersect(special);
  for (auto [lo, hi] : escaped.ranges()) {
    for (uint32_t cp = lo; cp <= hi; ++cp) alts.push_back(b.literal(json_escape_cp(cp)));
  }
  return b.alt(std::move(alts));
}

std::string json_escape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const uint32_t cp = decode_utf8(s, i, "string");
    if (json_special(cp)) {
      out += json_escape_cp(cp);
    } else {
      append_utf8(out, cp);
    }
  }
  return out;
}

}  // namespace invar::grammar
