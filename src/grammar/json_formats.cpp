#include "grammar/json_formats.h"

namespace invar::grammar {

namespace {

ExprId range(Builder& b, char lo, char hi) {
  ByteSet s;
  s.add_range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi));
  return b.bytes(s);
}

// Two-digit numbers lo..hi (00..99), as their alternatives by tens digit.
ExprId two_digits(Builder& b, int lo, int hi) {
  std::vector<ExprId> alts;
  for (int t = lo / 10; t <= hi / 10; ++t) {
    const int a = std::max(lo, t * 10) % 10, z = std::min(hi, t * 10 + 9) % 10;
    alts.push_back(b.seq({b.byte(static_cast<uint8_t>('0' + t)),
                          range(b, static_cast<char>('0' + a), static_cast<char>('0' + z))}));
  }
  return b.alt(std::move(alts));
}

ExprId literal_list(Builder& b, const std::vector<std::string>& xs) {
  std::vector<ExprId> alts;
  for (const auto& x : xs) alts.push_back(b.literal(x));
  return b.alt(std::move(alts));
}

ExprId date_expr(Builder& b) {
  const ExprId d = range(b, '0', '9');
  const ExprId nz = range(b, '1', '9');
  // 0001..9999
  const ExprId year = b.alt({b.seq({nz, d, d, d}), b.seq({b.byte('0'), nz, d, d}),
                             b.seq({b.literal("00"), nz, d}), b.seq({b.literal("000"), nz})});
  std::vector<std::string> mult4;  // 04, 08, ..., 96
  for (int k = 4; k < 100; k += 4) mult4.push_back((k < 10 ? "0" : "") + std::to_string(k));
  // Leap years: divisible by 4 but not by 100 (any century, last two digits a non-zero
  // multiple of 4), or by 400 (first two digits a multiple of 4, then 00; 0000 is no year).
  const ExprId leap = b.alt(
      {b.seq({d, d, literal_list(b, mult4)}), b.seq({literal_list(b, mult4), b.literal("00")})});
  const ExprId m31 = literal_list(b, {"01", "03", "05", "07", "08", "10", "12"});
  const ExprId m30 = literal_list(b, {"04", "06", "09", "11"});
  const ExprId dash = b.byte('-');
  return b.alt({b.seq({year, dash, m31, dash, two_digits(b, 1, 31)}),
                b.seq({year, dash, m30, dash, two_digits(b, 1, 30)}),
                b.seq({year, b.literal("-02-"), two_digits(b, 1, 28)}),
                b.seq({leap, b.literal("-02-29")})});
}

ExprId time_expr(Builder& b) {
  const ExprId d = range(b, '0', '9');
  const ExprId hh = two_digits(b, 0, 23), mm = two_digits(b, 0, 59);
  ByteSet sign;
  sign.add('+');
  sign.add('-');
  const ExprId offset = b.alt({b.byte('Z'), b.seq({b.bytes(sign), hh, b.byte(':'), mm})});
  return b.seq(
      {hh, b.byte(':'), mm, b.byte(':'), mm, b.opt(b.seq({b.byte('.'), b.plus(d)})), offset});
}

ExprId uuid_expr(Builder& b) {
  ByteSet hex;
  hex.add_range('0', '9');
  hex.add_range('a', 'f');
  const ExprId h = b.bytes(hex);
  auto n = [&](int k) { return b.repeat(h, k, k); };
  const ExprId dash = b.byte('-');
  return b.seq({n(8), dash, n(4), dash, n(4), dash, n(4), dash, n(12)});
}

ExprId email_expr(Builder& b) {
  ByteSet atext;
  atext.add_range('a', 'z');
  atext.add_range('A', 'Z');
  atext.add_range('0', '9');
  for (char c : std::string("!#$%&'*+/=?^_`{|}~-")) atext.add(static_cast<uint8_t>(c));
  ByteSet alnum;
  alnum.add_range('a', 'z');
  alnum.add_range('A', 'Z');
  alnum.add_range('0', '9');
  const ExprId atom = b.plus(b.bytes(atext));
  const ExprId local = b.seq({atom, b.star(b.seq({b.byte('.'), atom}))});
  const ExprId an = b.plus(b.bytes(alnum));
  const ExprId label = b.seq({an, b.star(b.seq({b.byte('-'), an}))});
  return b.seq({local, b.byte('@'), label, b.plus(b.seq({b.byte('.'), label}))});
}

}  // namespace

ExprId format_expr(Builder& b, const std::string& format) {
  if (format == "date") return date_expr(b);
  if (format == "time") return time_expr(b);
  if (format == "date-time") return b.seq({date_expr(b), b.byte('T'), time_expr(b)});
  if (format == "uuid") return uuid_expr(b);
  if (format == "email") return email_expr(b);
  return -1;
}

}  // namespace invar::grammar
