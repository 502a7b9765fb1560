// nginx for the fleet tests, rendered by deploy/nginx/render-nginx-conf and run unprivileged
// (as `nobody` when the test runs as root; pid, logs and temporary files in a private
// directory), in the foreground, killed by pid.
#pragma once

#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "port_free.h"
#include "server/http_test_util.h"

namespace invar::fleet::testing {

namespace fs = std::filesystem;
using server::testing::connect_local;

inline std::string file_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `argv` with stdout and stderr into `log`; returns the child's pid.
inline pid_t process_spawn(const std::vector<std::string>& argv, const fs::path& log) {
  pid_t pid = fork();
  if (pid == 0) {
    FILE* f = std::fopen(log.c_str(), "w");
    if (f) {
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
    }
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    execvp(cargv[0], cargv.data());
    _exit(127);
  }
  return pid;
}

inline void process_stop(pid_t& pid, int sig) {
  if (pid <= 0) return;
  kill(pid, sig);
  waitpid(pid, nullptr, 0);
  pid = -1;
}

// True once something accepts connections on `port` (≤ timeout_s), false if `pid` exits first.
inline bool port_wait(int port, pid_t pid, double timeout_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) return false;
    int fd = connect_local(port);
    if (fd >= 0) {
      ::close(fd);
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// An empty directory of this test process under the system's temporary directory.
inline fs::path scratch_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / (name + "-" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

class NginxProcess {
 public:
  // Renders the configuration for `replicas` (HOST:PORT) with the repository's script, then runs
  // nginx in the foreground on a free loopback port. `render_args` go to the script.
  NginxProcess(const fs::path& dir, const std::vector<std::string>& replicas,
               const std::string& render_args)
      : dir_(dir) {
    // A port taken by another process before nginx binds it: nginx exits, or another server
    // answers there (port_held_by); either way, another port.
    for (int attempt = 0; attempt < 5 && port_ == 0; ++attempt)
      start(replicas, render_args, invar::test::port_free());
  }
  ~NginxProcess() { process_stop(pid_, SIGTERM); }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  const std::string& error() const { return error_; }
  std::string access_log() const { return file_text(dir_ / "access.log"); }
  std::string error_log() const { return file_text(dir_ / "error.log"); }

 private:
  void start(const std::vector<std::string>& replicas, const std::string& render_args, int port) {
    const fs::path& dir = dir_;
    fs::create_directories(dir);
    port_ = port;
    std::string cmd = std::string(INVAR_SOURCE_DIR) + "/deploy/nginx/render-nginx-conf --prefix " +
                      dir.string() + " --listen 127.0.0.1:" + std::to_string(port_) + " " +
                      render_args;
    for (auto& r : replicas) cmd += " " + r;
    cmd += " > " + (dir / "nginx.conf").string() + " 2> " + (dir / "render.log").string();
    if (std::system(cmd.c_str()) != 0) {
      error_ = "render-nginx-conf failed: " + file_text(dir / "render.log");
      port_ = 0;
      return;
    }
    std::vector<std::string> argv = {INVAR_NGINX,
                                     "-p",
                                     dir.string(),
                                     "-c",
                                     (dir / "nginx.conf").string(),
                                     "-e",
                                     (dir / "error.log").string(),
                                     "-g",
                                     "daemon off;"};
    // Run as root, the test still starts nginx as an unprivileged user that owns only `dir`.
    if (geteuid() == 0) {
      const passwd* nobody = getpwnam("nobody");
      if (nobody == nullptr || ::chown(dir.c_str(), nobody->pw_uid, nobody->pw_gid) != 0) {
        error_ = "cannot hand " + dir.string() + " to user nobody";
        port_ = 0;
        return;
      }
      argv.insert(argv.begin(), {"setpriv", "--reuid=" + std::to_string(nobody->pw_uid),
                                 "--regid=" + std::to_string(nobody->pw_gid), "--clear-groups"});
    }
    pid_ = process_spawn(argv, dir / "nginx.stdout");
    if (!port_wait(port_, pid_, 30)) {
      error_ =
          "nginx did not start: " + file_text(dir / "nginx.stdout") + file_text(dir / "error.log");
      process_stop(pid_, SIGKILL);
      port_ = 0;
    } else if (!invar::test::port_held_by(port_, pid_)) {
      error_ = "port " + std::to_string(port_) + " was taken by another process";
      process_stop(pid_, SIGKILL);
      port_ = 0;
    }
  }

  fs::path dir_;
  pid_t pid_ = -1;
  int port_ = 0;
  std::string error_;
};

}  // namespace invar::fleet::testing
