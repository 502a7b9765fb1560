// The Responses API's request side (responses_front_end.h): a body's fields checked against
// OpenAI's definition and its input items (with a previous_response_id's conversation and the
// item_references it names, from the store) made into the chat completions body they mean.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "server/response_store.h"

namespace invar::server {

struct ResponsesRequest {
  nlohmann::ordered_json req;           // the Responses body
  nlohmann::ordered_json conversation;  // previous items, then this input's
  nlohmann::ordered_json chat;          // the chat body
  bool store = true;
};

// Throws ApiError naming the Responses field (404 for a previous response or item not stored).
ResponsesRequest responses_request_translate(std::string_view body, ResponseStore* store,
                                             const std::string& tenant);

}  // namespace invar::server
