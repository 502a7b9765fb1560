#include "fleet_processes.h"

#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "bench_peer.h"
#include "core/error.h"
#include "probe/server_process.h"

namespace invar::app {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

bool port_connects(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return up;
}

// Waits (≤ timeout_s) until something accepts on `port`; false if `p` exits first.
bool port_wait(ChildProcess& p, int port, double timeout_s) {
  auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (Clock::now() < deadline && p.running()) {
    if (port_connects(port)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const fs::path& log) : log_(log) {
  pid_ = fork();
  if (pid_ < 0) throw Error("fork failed for " + argv.at(0));
  if (pid_ == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    std::vector<char*> cargv;
    for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    execvp(cargv[0], cargv.data());
    std::fprintf(stderr, "cannot run %s\n", cargv[0]);
    _exit(127);
  }
}

ChildProcess::ChildProcess(ChildProcess&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)), status_(o.status_), log_(std::move(o.log_)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& o) noexcept {
  std::swap(pid_, o.pid_);  // the process this held goes with `o`
  std::swap(status_, o.status_);
  std::swap(log_, o.log_);
  return *this;
}

ChildProcess::~ChildProcess() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline && waitpid(pid_, nullptr, WNOHANG) == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (kill(pid_, 0) == 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

bool ChildProcess::running() {
  if (pid_ <= 0) return false;
  if (waitpid(pid_, &status_, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

std::string ChildProcess::log_text() const {
  std::ifstream in(log_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool health_wait(ChildProcess& p, int port, double timeout_s) {
  auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (Clock::now() < deadline && p.running()) {
    httplib::Client c("127.0.0.1", port);
    c.set_connection_timeout(1, 0);
    if (auto r = c.Get("/health"); r && r->status == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

int replica_start(ChildProcess& p, const std::vector<std::string>& args, const fs::path& log,
                  double timeout_s) {
  std::vector<std::string> argv = {"/proc/self/exe", "serve", "--port", "0"};
  argv.insert(argv.end(), args.begin(), args.end());
  p = ChildProcess(argv, log);
  const std::string mark = "listening on http://127.0.0.1:";
  auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  int port = 0;
  while (port == 0 && Clock::now() < deadline && p.running()) {
    std::string text = p.log_text();
    if (auto at = text.find(mark); at != std::string::npos)
      port = std::atoi(text.c_str() + at + mark.size());
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  double left = std::chrono::duration<double>(deadline - Clock::now()).count();
  if (port == 0 || !health_wait(p, port, left))
    throw Error("replica did not become healthy (log " + log.string() + "):\n" + p.log_text());
  return port;
}

int server_start(ChildProcess& p, std::vector<std::string> argv, const fs::path& log,
                 double timeout_s) {
  const int port = probe::port_free_find();
  const std::string exe = argv.at(0);
  argv.insert(argv.end(), {"--host", "127.0.0.1", "--port", std::to_string(port)});
  p = ChildProcess(argv, log);
  if (health_wait(p, port, timeout_s)) return port;
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
  const std::string how = p.running()
                              ? "no healthy /health within " + std::to_string(int(timeout_s)) + " s"
                              : process_exit_text(p.exit_status());
  std::string text = p.log_text();
  if (text.size() > 2000) text = "..." + text.substr(text.size() - 2000);
  throw Error(exe + " did not start (" + cmd + "): " + how + "; its log (" + log.string() +
              ") ends:\n" + text);
}

int nginx_start(ChildProcess& p, const std::string& nginx, const std::string& render_script,
                const std::string& render_args, const std::vector<std::string>& upstreams,
                const fs::path& dir) {
  fs::create_directories(dir);
  const int port = probe::port_free_find();
  std::string cmd = render_script + " --prefix " + dir.string() +
                    " --listen 127.0.0.1:" + std::to_string(port) + " " + render_args;
  for (const auto& u : upstreams) cmd += " " + u;
  cmd += " > " + (dir / "nginx.conf").string();
  if (std::system(cmd.c_str()) != 0)
    throw Error("rendering the nginx configuration failed: " + cmd);
  p = ChildProcess({nginx, "-p", dir.string(), "-c", (dir / "nginx.conf").string(), "-e",
                    (dir / "error.log").string(), "-g", "daemon off;"},
                   dir / "nginx.log");
  if (port_wait(p, port, 30)) return port;
  throw Error("nginx did not start (" + (dir / "error.log").string() + "):\n" + p.log_text());
}

int redis_start(ChildProcess& p, const std::string& redis_server, const fs::path& dir) {
  const int port = probe::port_free_find();
  p = ChildProcess({redis_server, "--port", std::to_string(port), "--bind", "127.0.0.1", "--save",
                    "", "--appendonly", "no", "--dir", dir.string(), "--daemonize", "no"},
                   dir / "redis.log");
  if (port_wait(p, port, 30)) return port;
  throw Error("redis-server did not start:\n" + p.log_text());
}

}  // namespace invar::app
