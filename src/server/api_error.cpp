#include "server/api_error.h"

#include <cstdio>
#include <nlohmann/json.hpp>

namespace invar::server {

std::string echo_cut(std::string_view value, size_t max_bytes) {
  if (value.size() <= max_bytes) return std::string(value);
  // Back off to the start of a character: a cut never leaves half of one.
  size_t n = max_bytes;
  while (n > 0 && (static_cast<unsigned char>(value[n]) & 0xC0) == 0x80) --n;
  return std::string(value.substr(0, n)) + "… (" + std::to_string(value.size()) + " bytes)";
}

std::string ApiError::to_json() const {
  nlohmann::json e = {{"message", echo_cut(message, kErrorMessageBytes)},
                      {"type", type},
                      {"param", param.empty() ? nlohmann::json()
                                              : nlohmann::json(echo_cut(param, kErrorParamBytes))},
                      {"code", code.empty() ? nlohmann::json() : nlohmann::json(code)}};
  nlohmann::json body = {{"error", e}};
  // Messages may quote client bytes; never let them make the body invalid UTF-8.
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ApiError bad_request(std::string param, std::string message) {
  return {400, std::move(message), "invalid_request_error", std::move(param), ""};
}

ApiError unauthorized() {
  return {401,
          "invalid or missing API key: send it as 'Authorization: Bearer <key>' "
          "or 'x-api-key: <key>'",
          "authentication_error", "", "invalid_api_key"};
}

ApiError not_found(std::string message, std::string code) {
  return {404, std::move(message), "invalid_request_error", "", std::move(code)};
}

ApiError payload_too_large(size_t limit) {
  return {413, "request body exceeds the limit of " + std::to_string(limit) + " bytes",
          "invalid_request_error", "", "payload_too_large"};
}

ApiError overloaded(std::string message) {
  return {429, std::move(message), "server_overloaded", "", "too_many_requests"};
}

ApiError unavailable(std::string message) {
  return {503, std::move(message), "server_unavailable", "", "service_unavailable"};
}

ApiError internal_error(std::string message) {
  return {500, std::move(message), "server_error", "", ""};
}

ApiError api_error_of(ErrorKind kind, std::string param, std::string message) {
  switch (kind) {
    case ErrorKind::invalid_request:
    case ErrorKind::context_overflow:
      return bad_request(std::move(param), std::move(message));
    case ErrorKind::overloaded:
      return overloaded(std::move(message));
    case ErrorKind::shutting_down:
      return unavailable(std::move(message));
    case ErrorKind::nonfinite:
      // The model file's weights failed, not invar (500) and not the request (4xx): 502, and
      // never a NaN in a response.
      return {502, std::move(message), "server_error", "", "nonfinite_logits"};
    case ErrorKind::internal:
      break;
  }
  return internal_error(std::move(message));
}

ApiError api_error_of(const RequestFault& f, std::string field, const std::string& sent) {
  if (field.empty()) field = f.param;
  const auto whole = [](double x) { return std::to_string(static_cast<long long>(x)); };
  const auto number = [](double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", x);
    return std::string(buf);
  };
  const std::string got = !sent.empty() ? sent : f.integral ? whole(f.got) : number(f.got);
  switch (f.rule) {
    case FaultRule::range:
      if (f.param == "logit_bias")
        return bad_request(field, "'" + field + "' values must be numbers in [" + number(f.lo) +
                                      ", " + number(f.hi) + "], got " + got);
      if (f.integral)
        return bad_request(field, "'" + field + "' must be between " + whole(f.lo) + " and " +
                                      whole(f.hi) + ", got " + got);
      return bad_request(field, "'" + field + "' must be in " + (f.lo_open ? "(" : "[") +
                                    number(f.lo) + ", " + number(f.hi) + "], got " + got);
    case FaultRule::not_a_token: {
      const std::string vocab = "(vocabulary size " + whole(f.hi) + ")";
      if (f.param == "prompt")
        return bad_request(field, field + "[" + std::to_string(f.index) + "] = " + got +
                                      " is not a token id " + vocab);
      if (f.param == "logit_bias")
        return bad_request(
            field, "'" + field + "' names token " + got + ", which is not a token id " + vocab);
      break;
    }
    case FaultRule::empty:
      if (f.param == "stop") return bad_request(field, "'" + field + "' strings must not be empty");
      return bad_request(field, "'" + field + "' encodes to no tokens");
    case FaultRule::context: {
      const auto prompt = static_cast<long long>(f.lo), total = static_cast<long long>(f.got);
      return bad_request(field, "this model's maximum context length is " + whole(f.hi) +
                                    " tokens, but " + std::to_string(total) + " were requested (" +
                                    std::to_string(prompt) + " in the prompt, " +
                                    std::to_string(total - prompt) +
                                    " in the completion): shorten the prompt or lower max_tokens");
    }
    case FaultRule::exceeds:
      return bad_request(
          field, "'" + field + "' must be at most 'max_tokens' (" + whole(f.hi) + "), got " + got);
    case FaultRule::other:
      break;
  }
  return api_error_of(f.kind, f.param, f.message);
}

}  // namespace invar::server
