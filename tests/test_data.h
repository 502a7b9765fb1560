// Paths into tests/data/ and the loader of the float64 reference files, which refuses a file
// written in a format other than the one the tests read (tests/data/reference/README.md).
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace invar::test {

inline constexpr int kReferenceFormat = 1;

inline std::string data_path(const std::string& rel) {
  return std::string(INVAR_TEST_DATA_DIR) + "/" + rel;
}

inline nlohmann::json load_reference_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  nlohmann::json j = nlohmann::json::parse(in);
  const auto format = j.find("format");
  if (format == j.end() || !format->is_number_integer() ||
      format->get<int64_t>() != kReferenceFormat) {
    const std::string found = format == j.end() ? "no format field" : "format " + format->dump();
    throw std::runtime_error(path + ": " + found + ", the tests read format " +
                             std::to_string(kReferenceFormat));
  }
  return j;
}

// tests/data/reference/<model>.json, the oracle for tests/data/models/<model>.gguf.
inline nlohmann::json load_reference(const std::string& model) {
  return load_reference_file(data_path("reference/" + model + ".json"));
}

}  // namespace invar::test
