// Which front end serves which path (front_end.h): one line per front end.
#include "server/front_end.h"
#include "server/messages_front_end.h"

namespace invar::server {

std::unique_ptr<FrontEnd> front_end_for(std::string_view path) {
  if (path == "/v1/messages" || path == "/v1/messages/count_tokens")
    return std::make_unique<MessagesFrontEnd>();
  return nullptr;
}

}  // namespace invar::server
