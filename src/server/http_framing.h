// Strict reading of an HTTP/1.x request head (request line + header fields), byte by byte as it
// arrives, so that a malformed or oversized head is refused the moment its first bad byte is
// seen rather than after a read timeout. Stricter than RFC 9112 allows a server to be where
// leniency is request-smuggling material behind a proxy: no bare LF, no obs-fold, no control
// bytes, one Content-Length of plain digits, Transfer-Encoding only "chunked" and never with
// Content-Length, exactly one Host on HTTP/1.1.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace invar::server {

struct HeadLimits {
  size_t max_head_bytes = 32 * 1024;  // request line + fields + blank line → 431 beyond
  size_t max_fields = 100;            // → 431 beyond
  size_t max_target = 8 * 1024;       // request-target bytes → 414 beyond
};

struct RequestHead {
  std::string method, target, version;  // version: "HTTP/1.0" | "HTTP/1.1"
  // Field values with the leading whitespace dropped and the trailing kept as sent (an
  // Authorization value is compared whole).
  std::vector<std::pair<std::string, std::string>> fields;
  size_t bytes = 0;  // length of the head, blank line included

  const std::string* field(std::string_view name) const;  // first, name case-insensitive
  size_t count(std::string_view name) const;
};

class HeadScanner {
 public:
  enum class Result { need_more, complete, error };

  explicit HeadScanner(HeadLimits limits = {}) : limits_(limits) {}
  // `input` holds the connection's bytes from the request's first byte on; only what was not
  // seen by an earlier call is scanned. After `complete`, head() is valid and head().bytes of
  // `input` belong to it.
  Result scan(std::string_view input);
  const RequestHead& head() const { return head_; }
  int error_status() const { return error_status_; }  // 400, 414 or 431
  const std::string& error_message() const { return error_; }
  bool started() const { return pos_ > 0; }
  void reset();

 private:
  enum class State {
    method,
    lead_lf,
    target,
    version,
    line_lf,
    line_start,
    name,
    value_lead,
    value,
    value_lf,
    end_lf
  };
  Result fail(int status, std::string message);
  Result finish();

  HeadLimits limits_;
  State state_ = State::method;
  size_t pos_ = 0, mark_ = 0;  // mark_: where the current token / field started
  std::string name_;
  RequestHead head_;
  int error_status_ = 0;
  std::string error_;
};

bool token_char(unsigned char c);  // RFC 9110 tchar
// Case-insensitive ASCII equality.
bool iequals(std::string_view a, std::string_view b);

}  // namespace invar::server
