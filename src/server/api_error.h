// Errors the HTTP edge returns, in OpenAI's error shape:
//   {"error": {"message", "type", "param", "code"}} with the matching HTTP status.
#pragma once

#include <string>
#include <string_view>

#include "engine/request.h"
#include "engine/request_check.h"

namespace invar::server {

// At most `max_bytes` of a client's value for a message (cut on a character boundary), with
// "… (N bytes)" saying how long the value was: errors and logs never echo a request unbounded.
constexpr size_t kEchoBytes = 256;
std::string echo_cut(std::string_view value, size_t max_bytes = kEchoBytes);

// What an error body carries at most: its message and its param are cut (echo_cut) beyond
// these, so a body stays under 1 KiB whatever the request held.
constexpr size_t kErrorMessageBytes = 640, kErrorParamBytes = 128;

struct ApiError {
  int status = 400;     // HTTP status
  std::string message;  // for the user: names the bad field and why
  std::string type = "invalid_request_error";
  std::string param;  // the offending field ("" → null)
  std::string code;   // OpenAI-style code ("" → null)

  std::string to_json() const;
};

ApiError bad_request(std::string param, std::string message);  // 400 naming the field
ApiError unauthorized();                                       // 401
ApiError not_found(std::string message, std::string code);     // 404
ApiError payload_too_large(size_t limit);                      // 413
ApiError overloaded(std::string message);                      // 429
ApiError unavailable(std::string message);                     // 503
ApiError internal_error(std::string message);                  // 500: a bug in invar only
// The status an engine failure deserves: 400 for the request's own faults, 429 when
// overloaded, 503 while shutting down, 500 for internal errors.
ApiError api_error_of(ErrorKind kind, std::string param, std::string message);
// A fault of the engine's one request check (engine/request_check.h) in OpenAI's words, the
// same for every endpoint. `field`: what the client called the field ("": the engine's name);
// `sent`: the value as the client wrote it ("": the engine's value, as a number).
ApiError api_error_of(const RequestFault& f, std::string field = "", const std::string& sent = "");

}  // namespace invar::server
