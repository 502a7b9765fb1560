#include "server/cors.h"

#include <algorithm>

namespace invar::server {

std::string cors_headers(const std::vector<std::string>& allowed, const std::string* origin) {
  if (allowed.empty() || !origin) return "";
  if (std::find(allowed.begin(), allowed.end(), "*") != allowed.end())
    return "Access-Control-Allow-Origin: *\r\n";
  if (std::find(allowed.begin(), allowed.end(), *origin) == allowed.end()) return "";
  // The answer depends on the Origin field: caches must keep one per origin.
  return "Access-Control-Allow-Origin: " + *origin + "\r\nVary: Origin\r\n";
}

HttpReply cors_preflight(const HttpRequest& req) {
  HttpReply r;
  r.status = 200;
  r.content_type = "text/plain";
  // The headers the browser asks for (the openai client sends its own x-stainless-* ones); the
  // framing layer has already refused control bytes in field values.
  const std::string* asked = req.head.field("Access-Control-Request-Headers");
  r.headers = "Access-Control-Allow-Methods: GET, POST, OPTIONS\r\nAccess-Control-Allow-Headers: " +
              (asked && !asked->empty() ? *asked : std::string("Authorization, Content-Type")) +
              "\r\nAccess-Control-Max-Age: 600\r\n";
  return r;
}

}  // namespace invar::server
