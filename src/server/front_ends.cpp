// Which front end serves which path (front_end.h): one line per front end.
#include "server/front_end.h"

namespace invar::server {

std::unique_ptr<FrontEnd> front_end_for(std::string_view path) {
  (void)path;
  return nullptr;
}

}  // namespace invar::server
