// A server the probe starts itself for one arm: `--server-cmd 'TEMPLATE with {port}'`. Each arm
// gets a fresh process, so no arm sees a cache another arm warmed.
#pragma once

#include <sys/types.h>

#include <string>

namespace invar::probe {

// A TCP port on 127.0.0.1 that was free a moment ago.
int port_free_find();

// Every "{port}" in `tmpl` replaced by `port`; throws invar::Error if there is none.
std::string server_cmd_expand(const std::string& tmpl, int port);

class ServerProcess {
 public:
  // Runs `/bin/sh -c cmd` in its own process group, output to `log_path` ("" → /dev/null).
  ServerProcess(const std::string& cmd, const std::string& log_path);
  ~ServerProcess();  // stops it
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Polls GET url/health until 200; throws invar::Error (with the log's tail) if the process
  // exits first or `timeout_s` passes.
  void wait_healthy(const std::string& url, double timeout_s);
  // SIGTERM to the group, SIGKILL after `grace_s`; idempotent.
  void stop(double grace_s = 10);
  bool running();

 private:
  std::string log_tail() const;
  pid_t pid_ = -1;
  std::string cmd_, log_path_;
};

}  // namespace invar::probe
