// Runs the real `invar serve` binary on a free loopback port for integration tests, and a curl
// runner for requests made exactly as a user would.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "http_test_util.h"

namespace invar::server::testing {

inline const std::string kInvarBin = std::string(INVAR_BINARY_DIR) + "/apps/invar/invar";
inline const std::string kTinyModel =
    std::string(INVAR_TEST_DATA_DIR) + "/models/qwen3next-tiny.gguf";

class ServeProcess {
 public:
  // Starts `invar serve --port 0 <args>` and waits until /health answers 200.
  explicit ServeProcess(std::vector<std::string> args, const std::string& name) {
    log_ = std::string(INVAR_BINARY_DIR) + "/tests/server/" + name + ".log";
    std::vector<std::string> argv = {kInvarBin, "serve", "--port", "0"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::remove(log_.c_str());  // a previous run's port must not be read back
    pid_ = fork();
    if (pid_ == 0) {
      FILE* f = std::fopen(log_.c_str(), "w");
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
      std::vector<char*> cargv;
      for (auto& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      execv(cargv[0], cargv.data());
      _exit(127);
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (port_ == 0 && std::chrono::steady_clock::now() < deadline && alive()) {
      std::ifstream in(log_);
      std::stringstream ss;
      ss << in.rdbuf();
      std::string text = ss.str();
      auto p = text.find("listening on http://127.0.0.1:");
      if (p != std::string::npos)
        port_ = std::atoi(text.c_str() + p + 30);
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    while (port_ != 0 && std::chrono::steady_clock::now() < deadline && alive()) {
      int fd = connect_local(port_);
      if (fd >= 0) {
        send_all(fd, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        char buf[64] = {};
        ::recv(fd, buf, sizeof buf - 1, 0);
        ::close(fd);
        if (status_of(buf) == 200) return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    port_ = 0;  // failed: tests check port() and print log()
  }
  ~ServeProcess() {
    if (pid_ > 0 && alive()) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string log() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // Waits until the log holds `text` at least `count` times (an event, instead of a sleep);
  // false if the process exits first or `timeout_s` (a guard against a hang) passes.
  bool log_wait(const std::string& text, int count = 1, double timeout_s = 60) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    for (;;) {
      const std::string l = log();
      int n = 0;
      for (size_t p = l.find(text); p != std::string::npos; p = l.find(text, p + text.size())) ++n;
      if (n >= count) return true;
      if (!alive() || std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  bool alive() {
    if (exited_) return false;
    int st = 0;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      exited_ = true;
      status_ = st;
      return false;
    }
    return true;
  }
  void signal(int sig) { kill(pid_, sig); }
  // The exit code once exited (128 + N for a signal), -1 while running.
  int exit_code() {
    if (alive()) return -1;
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
  }
  // Sends `sig` and waits (≤ timeout) for the exit; returns the exit code, -1 if it did not exit.
  int stop(int sig, double timeout_s) {
    kill(pid_, sig);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (alive() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!exited_) return -1;
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_;
  bool exited_ = false;
  int status_ = 0;
};

// The process's resident memory (VmRSS) in KiB, -1 when it cannot be read.
inline int64_t resident_kib(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  return -1;
}

struct CurlResult {
  int status = 0;
  std::string body;
};

// curl -s with `args` (already shell-quoted); the status comes from -w.
inline CurlResult curl(const std::string& args) {
  std::string cmd = "curl -s -S --max-time 60 -w '\\n%{http_code}' " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  CurlResult r;
  auto nl = out.rfind('\n');
  if (nl == std::string::npos) return r;
  r.status = std::atoi(out.c_str() + nl + 1);
  r.body = out.substr(0, nl);
  return r;
}

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace invar::server::testing
