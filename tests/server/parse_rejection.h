// Request-parsing tests: the ApiError a body is refused with (a failure if it is accepted).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "server/api_error.h"
#include "server/api_request.h"

namespace invar::server::testing {

inline ApiError parse_rejection(const std::string& body, Endpoint ep = Endpoint::completions) {
  try {
    api_request_parse(body, ep);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return {};
}

}  // namespace invar::server::testing
