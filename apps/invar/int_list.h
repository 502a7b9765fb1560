// Comma-separated positive integers from a flag ("128,512,2048"), for the bench commands.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"

namespace invar::app {

inline std::vector<int64_t> int_list_parse(const std::string& flag, const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      out.push_back(std::stoll(item));
    } catch (const std::exception&) {
      throw Error(flag + ": '" + item + "' is not a number");
    }
    if (out.back() < 1) throw Error(flag + ": every entry must be >= 1");
  }
  if (out.empty()) throw Error(flag + ": empty list");
  return out;
}

}  // namespace invar::app
