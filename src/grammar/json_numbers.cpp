#include "grammar/json_numbers.h"

#include <string>

namespace invar::grammar {

namespace {

ExprId digit_range(Builder& b, char lo, char hi) {
  ByteSet s;
  s.add_range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi));
  return b.bytes(s);
}

// Strings of digits of the same length n between lo and hi (inclusive, lexicographic =
// numeric order at equal length), leading zeros allowed: the classic prefix split.
ExprId same_length(Builder& b, const std::string& lo, const std::string& hi) {
  const size_t n = lo.size();
  if (n == 0) return b.empty();
  if (lo[0] == hi[0])
    return b.seq({b.byte(static_cast<uint8_t>(lo[0])), same_length(b, lo.substr(1), hi.substr(1))});
  const std::string rest_lo = lo.substr(1), rest_hi = hi.substr(1);
  const bool lo_min = rest_lo.find_first_not_of('0') == std::string::npos;
  const bool hi_max = rest_hi.find_first_not_of('9') == std::string::npos;
  const ExprId any_rest =
      b.repeat(digit_range(b, '0', '9'), static_cast<int64_t>(n - 1), static_cast<int64_t>(n - 1));
  std::vector<ExprId> alts;
  char mid_lo = lo[0], mid_hi = hi[0];
  if (!lo_min) {
    alts.push_back(b.seq(
        {b.byte(static_cast<uint8_t>(lo[0])), same_length(b, rest_lo, std::string(n - 1, '9'))}));
    ++mid_lo;
  }
  if (!hi_max) --mid_hi;
  if (mid_lo <= mid_hi)
    alts.push_back(n == 1 ? digit_range(b, mid_lo, mid_hi)
                          : b.seq({digit_range(b, mid_lo, mid_hi), any_rest}));
  if (!hi_max) {
    alts.push_back(b.seq(
        {b.byte(static_cast<uint8_t>(hi[0])), same_length(b, std::string(n - 1, '0'), rest_hi)}));
  }
  return b.alt(std::move(alts));
}

std::string pow10_minus1(size_t n) {
  return std::string(n, '9');
}
std::string pow10(size_t n) {
  return "1" + std::string(n, '0');
}

// Canonical non-negative integers in [lo, hi] (hi nullopt: unbounded). lo, hi as decimal text.
ExprId nonneg_range(Builder& b, uint64_t lo, std::optional<uint64_t> hi) {
  const std::string slo = std::to_string(lo);
  std::vector<ExprId> alts;
  const size_t n_lo = slo.size();
  const size_t n_hi = hi ? std::to_string(*hi).size() : n_lo;
  for (size_t n = n_lo; n <= n_hi; ++n) {
    const std::string a = n == n_lo ? slo : pow10(n - 1);
    const std::string z = (hi && n == n_hi) ? std::to_string(*hi) : pow10_minus1(n);
    alts.push_back(same_length(b, a, z));
  }
  if (!hi) {
    // Every number with more digits than lo.
    alts.push_back(
        b.seq({digit_range(b, '1', '9'),
               b.repeat(digit_range(b, '0', '9'), static_cast<int64_t>(n_lo), kUnbounded)}));
  }
  return b.alt(std::move(alts));
}

}  // namespace

ExprId integer_range_expr(Builder& b, std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<ExprId> alts;
  // Negative part: -y for y in [max(1, -hi), -lo].
  if (!lo || *lo < 0) {
    const uint64_t ylo = (hi && *hi < 0) ? static_cast<uint64_t>(-(*hi + 1)) + 1 : 1;
    std::optional<uint64_t> yhi;
    if (lo) yhi = static_cast<uint64_t>(-(*lo + 1)) + 1;
    alts.push_back(b.seq({b.byte('-'), nonneg_range(b, ylo, yhi)}));
  }
  if (!hi || *hi >= 0) {
    const uint64_t a = (lo && *lo > 0) ? static_cast<uint64_t>(*lo) : 0;
    std::optional<uint64_t> z;
    if (hi) z = static_cast<uint64_t>(*hi);
    alts.push_back(nonneg_range(b, a, z));
  }
  return b.alt(std::move(alts));
}

namespace {

// y = I(.F)? with y >= 0 in the range (lo, hi integers, lo >= 0; hi nullopt: unbounded).
ExprId nonneg_decimal(Builder& b, uint64_t lo, bool lo_inc, std::optional<uint64_t> hi,
                      bool hi_inc) {
  const ExprId digit = digit_range(b, '0', '9');
  std::vector<ExprId> alts;
  // F zero or absent: y = I, so I itself must be in range.
  const uint64_t a = lo_inc ? lo : lo + 1;
  std::optional<uint64_t> z = hi;
  bool ok = true;
  if (hi && !hi_inc) {
    if (*hi == 0)
      ok = false;
    else
      z = *hi - 1;
  }
  if (ok && (!z || a <= *z)) {
    alts.push_back(
        b.seq({nonneg_range(b, a, z), b.opt(b.seq({b.byte('.'), b.plus(b.byte('0'))}))}));
  }
  // F non-zero: I < y < I + 1, so lo <= I and I + 1 <= hi.
  if (!hi || *hi >= lo + 1) {
    std::optional<uint64_t> zi;
    if (hi) zi = *hi - 1;
    const ExprId nonzero_frac =
        b.seq({b.byte('.'), b.star(digit), digit_range(b, '1', '9'), b.star(digit)});
    alts.push_back(b.seq({nonneg_range(b, lo, zi), nonzero_frac}));
  }
  if (alts.empty()) return -1;
  return b.alt(std::move(alts));
}

}  // namespace

ExprId decimal_range_expr(Builder& b, std::optional<int64_t> lo, bool lo_inclusive,
                          std::optional<int64_t> hi, bool hi_inclusive) {
  std::vector<ExprId> alts;
  // x < 0: x = -y, y > 0 with -hi <(=) y <(=) -lo.
  if (!lo || *lo < 0) {
    uint64_t ylo = 0;
    bool ylo_inc = false;  // y > 0 always
    if (hi && *hi < 0) {
      ylo = static_cast<uint64_t>(-(*hi + 1)) + 1;
      ylo_inc = hi_inclusive;
    }
    std::optional<uint64_t> yhi;
    bool yhi_inc = lo_inclusive;
    if (lo) yhi = static_cast<uint64_t>(-(*lo + 1)) + 1;
    const ExprId e = nonneg_decimal(b, ylo, ylo_inc, yhi, yhi_inc);
    if (e >= 0) alts.push_back(b.seq({b.byte('-'), e}));
  }
  // x >= 0.
  if (!hi || *hi > 0 || (*hi == 0 && hi_inclusive)) {
    uint64_t a = 0;
    bool a_inc = true;
    if (lo && *lo >= 0) {
      a = static_cast<uint64_t>(*lo);
      a_inc = lo_inclusive;
    }
    std::optional<uint64_t> z;
    if (hi) z = static_cast<uint64_t>(*hi);
    const ExprId e = nonneg_decimal(b, a, a_inc, z, hi_inclusive);
    if (e >= 0) alts.push_back(e);
  }
  if (alts.empty()) return -1;
  return b.alt(std::move(alts));
}

ExprId number_expr(Builder& b) {
  const ExprId digit = digit_range(b, '0', '9');
  const ExprId int_part = b.alt({b.byte('0'), b.seq({digit_range(b, '1', '9'), b.star(digit)})});
  ByteSet e, sign;
  e.add('e');
  e.add('E');
  sign.add('+');
  sign.add('-');
  return b.seq({b.opt(b.byte('-')), int_part, b.opt(b.seq({b.byte('.'), b.plus(digit)})),
                b.opt(b.seq({b.bytes(e), b.opt(b.bytes(sign)), b.plus(digit)}))});
}

}  // namespace invar::grammar
