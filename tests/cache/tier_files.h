// Files of the disk tier for its tests: a fresh directory per test and process, and the files
// under one with a given extension (".blk" records, ".tmp" writes in progress).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

namespace invar::testing {

// TMPDIR/invar-tier-<name>-<pid>, empty.
inline std::string tier_temp_dir(const std::string& name) {
  namespace fs = std::filesystem;
  const std::string d =
      fs::temp_directory_path().string() + "/invar-tier-" + name + "-" + std::to_string(::getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

inline std::vector<std::string> files_under(const std::string& dir, const std::string& ext) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::error_code ec;
  for (auto& e : fs::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ext) out.push_back(e.path().string());
  return out;
}

}  // namespace invar::testing
