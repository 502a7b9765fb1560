// The processes `invar bench fleet` and `invar bench serve` run on loopback: `invar serve`
// replicas, llama-server, nginx rendered by deploy/nginx/render-nginx-conf, and redis-server. Each
// runs in the foreground with its output in a log file under the run's directory, and is killed by
// pid when its owner goes.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace invar::app {

class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(const std::vector<std::string>& argv, const std::filesystem::path& log);
  ChildProcess(ChildProcess&& o) noexcept;
  ChildProcess& operator=(ChildProcess&& o) noexcept;
  ~ChildProcess();
  bool running();
  // The waitpid status once running() has seen the process end, else -1.
  int exit_status() const { return status_; }
  std::string log_text() const;
  const std::filesystem::path& log() const { return log_; }

 private:
  pid_t pid_ = -1;
  int status_ = -1;
  std::filesystem::path log_;
};

// Waits (≤ timeout_s) until GET /health on 127.0.0.1:port answers 200.
bool health_wait(ChildProcess& p, int port, double timeout_s);

// `invar serve --port 0 <args>`; returns the port it printed, or throws with its log.
int replica_start(ChildProcess& p, const std::vector<std::string>& args,
                  const std::filesystem::path& log, double timeout_s);

// `argv` with `--host 127.0.0.1 --port P` appended, P a free loopback port (a server that takes
// llama-server's flags); waits (≤ timeout_s) for GET /health 200. Returns P, or throws with how
// the process ended and the tail of its log.
int server_start(ChildProcess& p, std::vector<std::string> argv, const std::filesystem::path& log,
                 double timeout_s);

// nginx for `upstreams` (HOST:PORT) on a free loopback port, configured by `render_script`
// with `render_args`; its pid, logs and temporary files under `dir`. Returns the port.
int nginx_start(ChildProcess& p, const std::string& nginx, const std::string& render_script,
                const std::string& render_args, const std::vector<std::string>& upstreams,
                const std::filesystem::path& dir);

// redis-server in memory (no RDB, no AOF) on a free loopback port. Returns the port.
int redis_start(ChildProcess& p, const std::string& redis_server, const std::filesystem::path& dir);

}  // namespace invar::app
