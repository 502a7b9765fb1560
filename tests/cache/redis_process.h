// A real redis-server on a free loopback port for tests: no persistence, a byte budget with LRU
// eviction, stopped (SIGKILL) when the object goes; stop() and restart() (same port, empty) play
// a crash. A server that is absent or never answers is the test's failure (ASSERT_NE(port(), 0)
// << failure()), not a skip: scripts/install-deps installs redis-server. With a password it
// requires AUTH; with a TLS directory (cert.pem, key.pem: tls_files_make) it also listens for TLS
// on tls_port().
#pragma once

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "port_free.h"

namespace invar::testing {

inline std::string redis_server_binary() {
  for (const char* p : {"/usr/bin/redis-server", "/usr/local/bin/redis-server"})
    if (::access(p, X_OK) == 0) return p;
  return "";
}

class RedisProcess {
 public:
  explicit RedisProcess(const std::string& maxmemory = "64mb", std::string password = "",
                        std::string tls_dir = "")
      : maxmemory_(maxmemory), password_(std::move(password)), tls_dir_(std::move(tls_dir)) {
    if (redis_server_binary().empty()) {
      failure_ = "redis-server is not installed (scripts/install-deps installs it)";
      return;
    }
    // A port taken between port_free() and redis-server's bind makes it exit: another port.
    for (int attempt = 0; attempt < 5 && port_ == 0; ++attempt) {
      const int port = invar::test::port_free();
      if (!tls_dir_.empty()) tls_port_ = invar::test::port_free();
      if (spawn(port)) port_ = port;
    }
  }
  ~RedisProcess() { stop(); }
  // SIGKILL, as a crash: the data (no persistence) goes with it. port() stays what it was.
  void stop() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
  }
  // An empty server again on the same port; false if it does not answer.
  bool restart() {
    stop();
    return port_ != 0 && spawn(port_);
  }
  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;

  int port() const { return port_; }  // 0: not running
  // Why port() is 0: redis-server absent, exiting at start, or not answering PING in time.
  const std::string& failure() const { return failure_; }
  int tls_port() const { return tls_port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

  // One command's reply as a string ("" for nil or error); integer replies in decimal.
  std::string command(const std::vector<std::string>& argv) const {
    redisContext* c = redisConnect("127.0.0.1", port_);
    std::string out;
    if (c && !c->err && auth(c)) {
      std::vector<const char*> a;
      std::vector<size_t> len;
      for (auto& s : argv) {
        a.push_back(s.data());
        len.push_back(s.size());
      }
      auto* r = static_cast<redisReply*>(
          redisCommandArgv(c, static_cast<int>(a.size()), a.data(), len.data()));
      if (r && r->type == REDIS_REPLY_STRING) out.assign(r->str, r->len);
      if (r && r->type == REDIS_REPLY_INTEGER) out = std::to_string(r->integer);
      if (r && r->type == REDIS_REPLY_STATUS) out.assign(r->str, r->len);
      if (r && r->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i < r->elements; ++i)
          if (r->element[i]->type == REDIS_REPLY_STRING)
            out += std::string(r->element[i]->str, r->element[i]->len) + "\n";
      if (r) freeReplyObject(r);
    }
    if (c) redisFree(c);
    return out;
  }
  // A field of INFO (e.g. "used_memory"), −1 if absent.
  long long info_field(const std::string& section, const std::string& field) const {
    const std::string info = command({"INFO", section});
    const auto p = info.find(field + ":");
    return p == std::string::npos ? -1 : std::atoll(info.c_str() + p + field.size() + 1);
  }

 private:
  bool auth(redisContext* c) const {
    if (password_.empty()) return true;
    auto* r = static_cast<redisReply*>(redisCommand(c, "AUTH %s", password_.c_str()));
    const bool ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    return ok;
  }
  bool ping(int port) const {
    timeval tv{0, 200000};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
    bool ok = false;
    if (c && !c->err && auth(c)) {
      auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
      ok = r && r->type == REDIS_REPLY_STATUS;
      if (r) freeReplyObject(r);
    }
    if (c) redisFree(c);
    return ok;
  }
  // Starts redis-server on `port`; true once it answers PING. The wait is bounded but generous:
  // under a sanitizer a loaded machine can take seconds to schedule a new process, and a server
  // that is merely slow must not read as an absent one.
  static constexpr auto kStartTimeout = std::chrono::seconds(30);
  bool spawn(int port) {
    std::vector<std::string> args = {redis_server_binary(),
                                     "--port",
                                     std::to_string(port),
                                     "--bind",
                                     "127.0.0.1",
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "no",
                                     "--maxmemory",
                                     maxmemory_,
                                     "--maxmemory-policy",
                                     "allkeys-lru",
                                     "--loglevel",
                                     "warning"};
    if (!password_.empty()) args.insert(args.end(), {"--requirepass", password_});
    if (!tls_dir_.empty())
      args.insert(args.end(),
                  {"--tls-port", std::to_string(tls_port_), "--tls-cert-file",
                   tls_dir_ + "/cert.pem", "--tls-key-file", tls_dir_ + "/key.pem",
                   "--tls-ca-cert-file", tls_dir_ + "/cert.pem", "--tls-auth-clients", "no"});
    pid_ = fork();
    if (pid_ == 0) {
      const int null = ::open("/dev/null", O_WRONLY);  // its start-up chatter
      dup2(null, 1);
      dup2(null, 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        failure_ = "redis-server on port " + std::to_string(port) + " exited at start (status " +
                   std::to_string(status) + ")";
        return false;
      }
      if (ping(port)) {
        if (invar::test::port_held_by(port, pid_)) return true;
        stop();  // another process's server took the port first
        failure_ = "port " + std::to_string(port) + " was taken by another process";
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    stop();
    failure_ = "redis-server on port " + std::to_string(port) + " did not answer PING within " +
               std::to_string(kStartTimeout.count()) + " s";
    return false;
  }

  std::string maxmemory_, password_, tls_dir_, failure_;
  pid_t pid_ = -1;
  int port_ = 0, tls_port_ = 0;
};

// A --cache-tier-key file at `path` holding `fill` 64 times (a test's fixed secret), mode 0600,
// written aside and renamed so that a server never reads half of it. Returns path.
inline std::string tier_key_file(const std::string& path, char fill) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  const std::string tmp = path + "." + std::to_string(::getpid());
  std::ofstream(tmp) << std::string(64, fill) << "\n";
  std::filesystem::permissions(
      tmp, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  std::filesystem::rename(tmp, path);
  return path;
}

// A self-signed certificate for 127.0.0.1 and localhost in dir (cert.pem, key.pem), made by the
// openssl command (Debian's openssl, installed by install-deps); false if it failed.
inline bool tls_files_make(const std::string& dir) {
  const std::string cmd =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 "
      "-addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout '" +
      dir + "/key.pem' -out '" + dir + "/cert.pem' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

}  // namespace invar::testing
