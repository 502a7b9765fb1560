#include "probe/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "core/error.h"
#include "probe/openai_client.h"
#include "probe/plan.h"

namespace invar::probe {

int port_free_find() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error("socket() failed while looking for a free port");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    throw Error("cannot bind a free port on 127.0.0.1");
  }
  int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

std::string server_cmd_expand(const std::string& tmpl, int port) {
  static const std::string key = "{port}";
  std::string out;
  size_t pos = 0, hits = 0;
  for (;;) {
    size_t f = tmpl.find(key, pos);
    if (f == std::string::npos) break;
    out += tmpl.substr(pos, f - pos) + std::to_string(port);
    pos = f + key.size();
    hits++;
  }
  out += tmpl.substr(pos);
  if (hits == 0) throw Error("server command '" + tmpl + "' has no {port} to fill in");
  return out;
}

ServerProcess::ServerProcess(const std::string& cmd, const std::string& log_path)
    : cmd_(cmd), log_path_(log_path) {
  const std::string out = log_path.empty() ? "/dev/null" : log_path;
  pid_ = fork();
  if (pid_ < 0) throw Error("fork failed starting: " + cmd);
  if (pid_ == 0) {
    // Own process group: stop() signals the shell and everything it started.
    setpgid(0, 0);
    int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    int nul = open("/dev/null", O_RDONLY);
    if (nul >= 0) dup2(nul, 0);
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid_, pid_);  // also from the parent, so a signal sent right away reaches the group
}

ServerProcess::~ServerProcess() {
  stop();
}

bool ServerProcess::running() {
  if (pid_ <= 0) return false;
  int st = 0;
  pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

std::string ServerProcess::log_tail() const {
  if (log_path_.empty()) return "";
  std::string s;
  try {
    s = read_text_file(log_path_);
  } catch (const Error&) {
    return "";
  }
  if (s.size() > 2000) s = "..." + s.substr(s.size() - 2000);
  return s.empty() ? "" : "\n--- server log (" + log_path_ + ") ---\n" + s;
}

void ServerProcess::wait_healthy(const std::string& url, double timeout_s) {
  OpenAIClient probe_client(url, Api::chat, "", "", 2.0);
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    if (probe_client.healthy()) return;
    if (!running()) throw Error("server exited before answering /health: " + cmd_ + log_tail());
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (waited > timeout_s) {
      stop();
      throw Error("server did not answer " + url + "/health within " +
                  std::to_string(int(timeout_s)) + " s: " + cmd_ + log_tail());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void ServerProcess::stop(double grace_s) {
  if (pid_ <= 0) return;
  kill(-pid_, SIGTERM);
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    int st = 0;
    pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_ || r < 0) break;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > grace_s) {
      kill(-pid_, SIGKILL);
      waitpid(pid_, &st, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // The shell may have exited while a child it started still runs: end the rest of the group.
  kill(-pid_, SIGKILL);
  pid_ = -1;
}

}  // namespace invar::probe
