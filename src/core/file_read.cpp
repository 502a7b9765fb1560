#include "core/file_read.h"

#include <fstream>
#include <iostream>
#include <sstream>

#include "core/error.h"

namespace invar {

std::string file_read(const std::string& path, const std::string& context) {
  const std::string where = context.empty() ? "" : context + ": ";
  std::ostringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(where + "cannot open '" + path + "'");
  ss << f.rdbuf();
  if (f.bad()) throw Error(where + "reading '" + path + "' failed");
  return ss.str();
}

}  // namespace invar
