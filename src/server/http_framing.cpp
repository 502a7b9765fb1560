#include "server/http_framing.h"

#include <algorithm>
#include <array>

namespace invar::server {
namespace {

constexpr std::array<std::string_view, 9> kMethods = {
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"};

std::string_view trim_trailing(std::string_view v) {
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

std::string printable(unsigned char c) {
  static const char* hex = "0123456789ABCDEF";
  return std::string("0x") + hex[c >> 4] + hex[c & 15];
}

}  // namespace

bool token_char(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(char(c)) != std::string_view::npos;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    unsigned char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x |= 0x20;
    if (y >= 'A' && y <= 'Z') y |= 0x20;
    if (x != y) return false;
  }
  return true;
}

const std::string* RequestHead::field(std::string_view name) const {
  for (auto& [n, v] : fields)
    if (iequals(n, name)) return &v;
  return nullptr;
}

size_t RequestHead::count(std::string_view name) const {
  return size_t(
      std::count_if(fields.begin(), fields.end(), [&](auto& f) { return iequals(f.first, name); }));
}

void HeadScanner::reset() {
  state_ = State::method;
  pos_ = mark_ = 0;
  name_.clear();
  head_ = RequestHead{};
  error_status_ = 0;
  error_.clear();
}

HeadScanner::Result HeadScanner::fail(int status, std::string message) {
  error_status_ = status;
  error_ = std::move(message);
  return Result::error;
}

HeadScanner::Result HeadScanner::scan(std::string_view in) {
  if (error_status_) return Result::error;
  for (; pos_ < in.size(); ++pos_) {
    const unsigned char c = static_cast<unsigned char>(in[pos_]);
    if (pos_ >= limits_.max_head_bytes)
      return fail(431, "request head exceeds " + std::to_string(limits_.max_head_bytes) + " bytes");
    switch (state_) {
      case State::method:
        if (c == '\r' && pos_ == mark_) {  // an empty line before the request line is tolerated
          state_ = State::lead_lf;
        } else if (c == ' ' && pos_ > mark_) {
          head_.method.assign(in.substr(mark_, pos_ - mark_));
          if (std::find(kMethods.begin(), kMethods.end(), head_.method) == kMethods.end())
            return fail(400, "malformed request line: unknown method");
          mark_ = pos_ + 1;
          state_ = State::target;
        } else if (!token_char(c) || pos_ - mark_ >= 16) {
          return fail(400, "malformed request line: bad method");
        }
        break;
      case State::lead_lf:
        if (c != '\n') return fail(400, "CR not followed by LF");
        mark_ = pos_ + 1;
        state_ = State::method;
        break;
      case State::target:
        if (c == ' ' && pos_ > mark_) {
          head_.target.assign(in.substr(mark_, pos_ - mark_));
          mark_ = pos_ + 1;
          state_ = State::version;
        } else if (c <= ' ' || c >= 0x7f) {
          return fail(400, "malformed request line: byte " + printable(c) + " in the target");
        } else if (pos_ - mark_ >= limits_.max_target) {
          return fail(414,
                      "request target exceeds " + std::to_string(limits_.max_target) + " bytes");
        }
        break;
      case State::version: {
        const size_t k = pos_ - mark_;  // index of c in the version
        if (c == '\r' && k == 8) {
          head_.version.assign(in.substr(mark_, 8));
          state_ = State::line_lf;
          break;
        }
        bool ok = k < 7 ? c == std::string_view("HTTP/1.")[k] : k == 7 && (c == '0' || c == '1');
        if (!ok)
          return fail(400, c == '\n' ? "bare LF in the request line"
                                     : "unsupported or malformed HTTP version");
        break;
      }
      case State::line_lf:
      case State::value_lf:
        if (c != '\n') return fail(400, "CR not followed by LF");
        if (state_ == State::value_lf) {
          if (head_.fields.size() >= limits_.max_fields)
            return fail(431, "more than " + std::to_string(limits_.max_fields) + " header fields");
          head_.fields.emplace_back(std::move(name_),
                                    std::string(in.substr(mark_, pos_ - 1 - mark_)));
          name_.clear();
        }
        state_ = State::line_start;
        break;
      case State::line_start:
        if (c == '\r') {
          state_ = State::end_lf;
        } else if (c == ' ' || c == '\t') {
          return fail(400, "obsolete line folding in the header");
        } else if (token_char(c)) {
          mark_ = pos_;
          state_ = State::name;
        } else {
          return fail(400, c == '\n' ? "bare LF in the header" : "malformed header field name");
        }
        break;
      case State::name:
        if (c == ':') {
          name_.assign(in.substr(mark_, pos_ - mark_));
          state_ = State::value_lead;
        } else if (c == '\r' || c == '\n') {
          return fail(400, "header line without a colon");
        } else if (!token_char(c)) {
          return fail(400, "byte " + printable(c) + " in a header field name");
        }
        break;
      case State::value_lead:
        if (c == ' ' || c == '\t') break;
        mark_ = pos_;
        state_ = State::value;
        [[fallthrough]];
      case State::value:
        if (c == '\r')
          state_ = State::value_lf;
        else if (c == '\n')
          return fail(400, "bare LF in the header");
        else if ((c < 0x20 && c != '\t') || c == 0x7f)
          return fail(400, "control byte " + printable(c) + " in a header field value");
        break;
      case State::end_lf:
        if (c != '\n') return fail(400, "CR not followed by LF");
        head_.bytes = ++pos_;
        return finish();
    }
  }
  return Result::need_more;
}

HeadScanner::Result HeadScanner::finish() {
  const RequestHead& h = head_;
  size_t n_length = h.count("Content-Length"), n_coding = h.count("Transfer-Encoding");
  if (n_length > 1) return fail(400, "more than one Content-Length");
  if (n_length == 1) {
    std::string_view v = trim_trailing(*h.field("Content-Length"));
    if (v.empty() || v.size() > 18 ||
        !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return fail(400, "Content-Length is not a decimal byte count");
  }
  if (n_coding > 1) return fail(400, "more than one Transfer-Encoding");
  if (n_coding == 1) {
    if (n_length) return fail(400, "Transfer-Encoding together with Content-Length");
    if (h.version == "HTTP/1.0") return fail(400, "Transfer-Encoding in an HTTP/1.0 request");
    if (!iequals(trim_trailing(*h.field("Transfer-Encoding")), "chunked"))
      return fail(400, "unsupported transfer coding (only 'chunked' is accepted)");
  }
  size_t n_host = h.count("Host");
  if (n_host > 1 || (n_host == 0 && h.version == "HTTP/1.1"))
    return fail(400, "an HTTP/1.1 request needs exactly one Host header");
  return Result::complete;
}

}  // namespace invar::server
