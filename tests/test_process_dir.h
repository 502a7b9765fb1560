// A folder of the test process's own under the build tree, so that CTests running in parallel
// never share a file; created on first use, removed with everything in it when the process exits.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace invar::test {

// INVAR_BINARY_DIR/tests/<name>-<pid>. One folder per process: the first call's name holds.
inline std::string test_process_dir(const std::string& name) {
  static const struct Dir {
    std::string path;
    explicit Dir(const std::string& n)
        : path(std::string(INVAR_BINARY_DIR) + "/tests/" + n + "-" + std::to_string(getpid())) {
      std::filesystem::create_directories(path);
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } d(name);
  return d.path;
}

}  // namespace invar::test
