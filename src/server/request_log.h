// One line per HTTP request on stderr (`invar serve --log-format text|json`): who asked what,
// how it ended and what it cost — refused ones too (408, 413, framing errors: the transport
// reports them). A line is written whole by one write, so lines from concurrent requests never
// interleave, and it is at most kRequestLogLineBytes long whatever the client sent: string
// fields are cut ("… (N bytes)") until it fits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/request.h"

namespace invar::server {

enum class LogFormat { text, json, none };

struct RequestRecord {
  std::string id;      // the response id ("chatcmpl-…"), else a fresh "req-…"
  std::string method;  // GET, POST, …
  std::string path;    // the endpoint, without the query
  int status = 0;      // HTTP status; 499: the client went away first
  std::string model, user;
  int64_t n = 0;  // choices (0: not a completion)
  std::optional<uint64_t> seed;
  Usage usage;         // prompt, cached and completion tokens are logged
  double ttft_s = -1;  // -1: no token
  double duration_s = 0;
  std::string error;  // the error message of a failed request
};

constexpr size_t kRequestLogLineBytes = 2048;
std::string request_log_line(const RequestRecord& r, LogFormat f);  // without the newline
void request_log_write(const RequestRecord& r, LogFormat f);        // to stderr
std::string request_log_id();                                       // "req-" + 16 hex digits

}  // namespace invar::server
