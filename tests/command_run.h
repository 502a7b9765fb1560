// Runs a shell command for the CLI tests and returns its exit status and output.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace invar::test {

struct CommandResult {
  int status;       // exit code, −1 when the command did not exit normally
  std::string out;  // what it printed on the streams the command line sends to stdout
};

inline CommandResult command_run(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, ""};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

}  // namespace invar::test
