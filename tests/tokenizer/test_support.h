// Shared helpers for the tokenizer tests: case-file loading and readable mismatch reports.
#pragma once

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "test_data.h"

namespace invar::test {

inline nlohmann::json load_json(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return nlohmann::json::parse(ss.str());
}

inline std::string source_path(const std::string& rel) {
  return std::string(INVAR_SOURCE_DIR) + "/" + rel;
}

// Text with non-ASCII and control bytes escaped, for failure messages.
inline std::string printable(const std::string& s, size_t max = 120) {
  std::string out;
  for (unsigned char c : s) {
    if (out.size() >= max) {
      out += "...";
      break;
    }
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    }
  }
  return out;
}

inline std::string ids_str(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  return s + "]";
}

// "" when equal, else where the first difference is and both sequences.
inline std::string ids_diff(const std::vector<int32_t>& want, const std::vector<int32_t>& got) {
  if (want == got) return "";
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  return "first mismatch at index " + std::to_string(i) + "\n  want " + ids_str(want) +
         "\n  got  " + ids_str(got);
}

}  // namespace invar::test
