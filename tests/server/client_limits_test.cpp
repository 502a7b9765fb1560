// Per-client caps (client_limits.h): one client that floods the server gets 429s while another
// is still served. The two clients are two loopback addresses (127.0.0.1 and 127.0.0.2), so the
// server tells them apart by peer address as it does real ones. The caps here are the derived
// defaults: three quarters of --queue-limit and --max-connections.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "fake_server.h"
#include "http_test_util.h"

namespace invar::server::testing {
namespace client_limits_test {

constexpr const char* kOther = "127.0.0.2";

// A connection to the server from `from` (a loopback address), or -1.
int connect_from(int port, const char* from) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in src{};
  src.sin_family = AF_INET;
  ::inet_pton(AF_INET, from, &src.sin_addr);
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(uint16_t(port));
  dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof dst) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// What the server sends on fd until it closes (or 5 s pass: "" when nothing came).
std::string read_until_close(int fd) {
  std::string out;
  char buf[4096];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      out.append(buf, size_t(n));
    } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
      break;
    }
  }
  return out;
}

// One request from `from` on its own connection; the whole response.
std::string request_from(int port, const char* from, const std::string& method,
                         const std::string& path, const std::string& body = "") {
  const int fd = connect_from(port, from);
  if (fd < 0) return "";
  send_all(fd, method + " " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" +
                   (body.empty() ? std::string()
                                 : "Content-Type: application/json\r\nContent-Length: " +
                                       std::to_string(body.size()) + "\r\n") +
                   "\r\n" + body);
  std::string out = read_until_close(fd);
  ::close(fd);
  return out;
}

TEST(ClientLimits, OneClientFloodsAnotherIsServed) {
  ServerConfig cfg;
  cfg.queue_limit = 8;  // a client may hold 6
  FakeServer s(cfg);
  s.fake->hold = true;  // everything admitted stays in flight
  const std::string body = R"({"prompt":"a","max_tokens":2})";
  std::vector<std::string> flood(6), other(1);
  std::vector<std::thread> held;
  for (size_t i = 0; i < flood.size(); ++i)
    held.emplace_back([&, i] { flood[i] = raw_post(s.port, "/v1/completions", body); });
  while (s.fake->submits < 6) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  const std::string refused = raw_post(s.port, "/v1/completions", body);
  EXPECT_EQ(status_of(refused), 429) << refused;
  EXPECT_NE(refused.find("--client-queue-limit"), std::string::npos) << refused;
  EXPECT_NE(refused.find("other clients are still served"), std::string::npos) << refused;
  // The server still has room, and the other client gets it.
  held.emplace_back(
      [&] { other[0] = request_from(s.port, kOther, "POST", "/v1/completions", body); });
  while (s.fake->submits < 7) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  s.fake->hold = false;
  for (auto& t : held) t.join();
  EXPECT_EQ(status_of(other[0]), 200) << other[0];
  for (const std::string& r : flood) EXPECT_EQ(status_of(r), 200) << r;
  const std::string m = s.get("/metrics")->body;
  EXPECT_NE(m.find("invar_client_limit_refusals_total{limit=\"queue\"} 1\n"), std::string::npos)
      << m;
  // Its requests answered, the flooding client is served again: its slots were given back.
  EXPECT_EQ(status_of(raw_post(s.port, "/v1/completions", body)), 200);
}

TEST(ClientLimits, IdleSocketsFromOneAddressLeaveHealthToOthers) {
  ServerConfig cfg;
  cfg.max_connections = 8;  // one address may hold 6
  FakeServer s(cfg);
  // One address opens as many idle sockets as the whole server takes: past 6, each is answered
  // 429 and closed at once.
  std::vector<int> fds;
  for (int i = 0; i < 8; ++i) fds.push_back(connect_local(s.port));
  int refused = 0;
  for (size_t i = 6; i < fds.size(); ++i) {
    const std::string r = read_until_close(fds[i]);
    refused += status_of(r) == 429;
    EXPECT_NE(r.find("--client-max-connections"), std::string::npos) << r;
  }
  EXPECT_EQ(refused, 2) << "the address held more than its share of connections";
  const std::string health = request_from(s.port, kOther, "GET", "/health");
  EXPECT_EQ(status_of(health), 200) << health;
  const std::string m = request_from(s.port, kOther, "GET", "/metrics");
  EXPECT_NE(m.find("invar_client_limit_refusals_total{limit=\"connections\"} 2\n"),
            std::string::npos)
      << m;
  for (int fd : fds) ::close(fd);
  // Its idle sockets closed, the address is served again.
  int status = 0;
  for (int i = 0; i < 200 && status != 200; ++i) {
    status = status_of(request_from(s.port, "127.0.0.1", "GET", "/health"));
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(status, 200);
}

}  // namespace client_limits_test
}  // namespace invar::server::testing
