#include "core/user_cache_dir.h"

#include <cstdlib>

namespace invar {

std::string user_cache_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg == '/') return std::string(xdg) + "/invar";
  const char* home = std::getenv("HOME");
  if (home && *home == '/') return std::string(home) + "/.cache/invar";
  return "";
}

}  // namespace invar
