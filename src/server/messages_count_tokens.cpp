#include "server/messages_count_tokens.h"

#include "server/api_response.h"
#include "server/messages_front_end.h"

namespace invar::server {

std::string messages_count_tokens(const Backend& b, std::string_view body,
                                  const ModelCheck& known) {
  const json chat = messages_chat_body(body, /*count=*/true);
  const json counted = json::parse(tokenize_api(b, json_text(chat), known));
  return json_text(json{{"input_tokens", counted.at("count")}});
}

}  // namespace invar::server
