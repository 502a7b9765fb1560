// Helpers for the server's HTTP tests: a raw socket client (exact bytes out, disconnect at will)
// and an SSE splitter.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace invar::server::testing {

inline int connect_local(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

inline bool send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += size_t(n);
  }
  return true;
}

// A POST with exactly these body bytes; returns the whole response (the server closes).
inline std::string raw_post(int port, const std::string& path, const std::string& body,
                            const std::string& extra_headers = "") {
  int fd = connect_local(port);
  if (fd < 0) return "";
  send_all(fd, "POST " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n" +
                   "Content-Type: application/json\r\n" + extra_headers +
                   "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, size_t(n));
  }
  ::close(fd);
  return out;
}

struct Exchange {
  std::string response;  // everything the server sent
  double seconds = 0;    // from the first byte sent until the server closed (or the timeout)
  bool closed = false;   // the server closed its side
  size_t sent = 0;
};

// Sends `bytes` (then whatever `more` appends, until it returns false) while reading what comes
// back, until the server closes its side or `timeout_s` passes. Reading as it goes means an
// early answer is seen even when the server stops reading and resets the connection.
inline Exchange exchange(int port, const std::string& bytes, double timeout_s = 5,
                         std::function<bool(std::string&)> more = nullptr) {
  Exchange ex;
  int fd = connect_local(port);
  if (fd < 0) return ex;
  auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::string out = bytes;
  size_t off = 0;
  bool can_send = true;
  char buf[65536];
  while (elapsed() < timeout_s) {
    if (off == out.size() && more) {
      out.clear();
      off = 0;
      if (!more(out)) more = nullptr;
    }
    pollfd p{fd, short(POLLIN | (can_send && off < out.size() ? POLLOUT : 0)), 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        ex.response.append(buf, size_t(n));
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
        ex.closed = true;
        break;
      }
    }
    if (p.revents & POLLOUT) {
      ssize_t n = ::send(fd, out.data() + off, out.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        off += size_t(n);
        ex.sent += size_t(n);
      } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
        can_send = false;
      }
    }
  }
  ex.seconds = elapsed();
  ::close(fd);
  return ex;
}

inline int status_of(const std::string& response) {
  if (response.size() < 12 || response.rfind("HTTP/1.", 0) != 0) return -1;
  return std::atoi(response.c_str() + 9);
}

// The JSON payloads of the "data:" events of an SSE body; "[DONE]" kept as a string.
inline std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    std::string ev = body.substr(pos, end - pos);
    if (ev.rfind("data: ", 0) == 0) out.push_back(ev.substr(6));
    pos = end + 2;
  }
  return out;
}

inline int64_t rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
  return 0;
}

// A sample's value in a Prometheus text exposition, -1 when absent.
inline double metric_value(const std::string& text, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("\n" + name + " ([0-9.e+-]+)\n"))) return -1;
  return std::stod(m[1]);
}

inline std::string hex(size_t n) {
  char b[20];
  std::snprintf(b, sizeof b, "%zx", n);
  return b;
}

// A chunked upload body of `total` bytes in 64 KiB chunks, for exchange()'s `more`.
inline std::function<bool(std::string&)> chunked_filler(size_t total) {
  auto piece =
      std::make_shared<std::string>(hex(64 * 1024) + "\r\n" + std::string(64 * 1024, 'a') + "\r\n");
  auto left = std::make_shared<size_t>(total);
  return [piece, left](std::string& out) {
    if (*left == 0) return false;
    out = *piece;
    *left -= std::min<size_t>(*left, 64 * 1024);
    return true;
  };
}

// Slowloris: `n` connections that each sent part of a request head and then add one byte to it
// every `every`, until destroyed. A connection the server drops is opened again.
class SlowClients {
 public:
  SlowClients(int port, int n, std::chrono::milliseconds every) {
    for (int i = 0; i < n; ++i) {
      int fd = open(port);
      if (fd < 0) break;
      fds_.push_back(fd);
    }
    drip_ = std::thread([this, port, every] {
      while (!stop_) {
        for (int& fd : fds_) {
          if (::send(fd, "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0 || errno == EAGAIN) continue;
          ::close(fd);
          fd = open(port);
        }
        std::this_thread::sleep_for(every);
      }
    });
  }
  ~SlowClients() {
    stop_ = true;
    drip_.join();
    for (int fd : fds_) ::close(fd);
  }
  int connected() const { return int(fds_.size()); }

 private:
  static int open(int port) {
    int fd = connect_local(port);
    if (fd >= 0) send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ");
    return fd;
  }

  std::vector<int> fds_;
  std::atomic<bool> stop_{false};
  std::thread drip_;
};

// GET /health `probes` times, `gap` apart: how many got 200, and the slowest answer in seconds.
inline std::pair<int, double> probe_health(int port, int probes, std::chrono::milliseconds gap) {
  int ok = 0;
  double worst = 0;
  for (int i = 0; i < probes; ++i) {
    Exchange ex = exchange(port, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 5);
    ok += status_of(ex.response) == 200;
    worst = std::max(worst, ex.seconds);
    std::this_thread::sleep_for(gap);
  }
  return {ok, worst};
}

}  // namespace invar::server::testing
