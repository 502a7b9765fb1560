// Which front end serves which path (front_end.h): one line per front end.
#include "server/front_end.h"
#include "server/messages_front_end.h"
#include "server/responses_front_end.h"

namespace invar::server {

std::unique_ptr<FrontEnd> front_end_for(std::string_view path, const FrontEndContext& ctx) {
  if (path == "/v1/messages" || path == "/v1/messages/count_tokens")
    return std::make_unique<MessagesFrontEnd>();
  if (path == "/v1/responses")
    return std::make_unique<ResponsesFrontEnd>(ctx.responses, ctx.tenant);
  return nullptr;
}

}  // namespace invar::server
