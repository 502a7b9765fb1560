// CORS for browsers calling `invar serve` from another origin (--allowed-origins ORIGIN…):
// preflight OPTIONS requests are answered, and a response to a listed origin ("*": any) says
// Access-Control-Allow-Origin. With no origins listed the server sends no CORS header, so
// browsers keep other origins out.
#pragma once

#include <string>
#include <vector>

#include "server/http_transport.h"

namespace invar::server {

// The header lines (CRLF-ended) a response to a request from `origin` (null: no Origin field)
// carries: "" unless the origin is allowed.
std::string cors_headers(const std::vector<std::string>& allowed, const std::string* origin);

// The answer to a preflight OPTIONS request: 200 with the methods and headers allowed (the
// Allow-Origin line itself comes from cors_headers, like every response's).
HttpReply cors_preflight(const HttpRequest& req);

}  // namespace invar::server
