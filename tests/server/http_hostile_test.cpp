// The HTTP layer under hostile traffic, over a scripted backend: the framing corpus (right
// status, answered before any deadline of the server's could fire, connection closed), pipelining,
// slow connections, a 100 MB chunked upload, the connection cap, the head deadline, and disconnects
// of whole and streamed requests.
#include <gtest/gtest.h>
#include <netinet/tcp.h>

#include <regex>
#include <thread>

#include "fake_server.h"
#include "hostile_http_corpus.h"
#include "http_test_util.h"

namespace http_hostile_test {

using namespace invar::server;
using namespace invar::server::testing;

namespace {

// The responses of a keep-alive exchange, in order: (status, body).
std::vector<std::pair<int, std::string>> split_responses(const std::string& all) {
  std::vector<std::pair<int, std::string>> out;
  size_t pos = 0;
  while (pos < all.size()) {
    size_t end = all.find("\r\n\r\n", pos);
    if (end == std::string::npos) break;
    std::string head = all.substr(pos, end - pos);
    std::smatch m;
    size_t len =
        std::regex_search(head, m, std::regex("Content-Length: ([0-9]+)")) ? std::stoul(m[1]) : 0;
    out.push_back({status_of(head), all.substr(end + 4, len)});
    pos = end + 4 + len;
  }
  return out;
}

// A raw request kept open: returns the socket once the engine holds the request.
int hold_request(FakeServer& s, const std::string& body) {
  int fd = connect_local(s.port);
  send_all(fd,
           "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           "Content-Length: " +
               std::to_string(body.size()) + "\r\n\r\n" + body);
  for (int i = 0; i < 1000 && s.fake->active() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  return fd;
}

}  // namespace

// The server's own deadlines, set far beyond the exchanges' give-up times (10 s, a guard against
// a hang): an answer, and a closed connection, then cannot come from a deadline firing.
ServerConfig deadlines_out_of_reach() {
  ServerConfig cfg;
  cfg.head_timeout_s = cfg.body_timeout_s = cfg.body_stall_s = cfg.idle_timeout_s = 600;
  return cfg;
}

TEST(HostileHttp, CorpusAnsweredBeforeAnyDeadlineAndClosed) {
  ServerConfig cfg = deadlines_out_of_reach();
  cfg.max_body_bytes = 1000;
  FakeServer s(cfg);
  auto cases = hostile_http_corpus();
  ASSERT_GE(cases.size(), 150u);
  for (auto& c : cases) {
    Exchange ex = exchange(s.port, c.bytes, 10);
    EXPECT_EQ(status_of(ex.response), c.status) << c.name << "\n" << ex.response.substr(0, 300);
    EXPECT_TRUE(ex.closed) << c.name << ": the connection stayed open (waiting for a timeout)";
    EXPECT_NE(ex.response.find("Connection: close\r\n"), std::string::npos) << c.name;
    EXPECT_NE(ex.response.find("{\"error\":{"), std::string::npos) << c.name;
  }
  EXPECT_EQ(s.get("/health")->status, 200);
  EXPECT_EQ(s.fake->submits.load(), 0) << "a malformed request reached the engine";
}

TEST(HostileHttp, WellFormedFramingIsServed) {
  FakeServer s;
  // Kept alive: answered, and the connection still open when the exchange gives up.
  Exchange keep = exchange(s.port, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", 0.3);
  EXPECT_EQ(status_of(keep.response), 200);
  EXPECT_FALSE(keep.closed);
  Exchange old = exchange(s.port, "GET /health HTTP/1.0\r\n\r\n", 5);
  EXPECT_EQ(status_of(old.response), 200);
  EXPECT_TRUE(old.closed) << "an HTTP/1.0 request without keep-alive ends the connection";
  Exchange old_kept =
      exchange(s.port, "GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 0.3);
  EXPECT_EQ(status_of(old_kept.response), 200);
  EXPECT_NE(old_kept.response.find("Connection: keep-alive\r\n"), std::string::npos)
      << old_kept.response;
  EXPECT_FALSE(old_kept.closed);
  std::string body = R"({"prompt":"abc","max_tokens":4})";
  Exchange chunked =
      exchange(s.port,
               "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
               "Chunked\r\nConnection: close\r\n\r\n" +
                   hex(5) + "\r\n" + body.substr(0, 5) + "\r\n" + hex(body.size() - 5) +
                   ";ext=1\r\n" + body.substr(5) + "\r\n0\r\nX-Trailer: t\r\n\r\n",
               5);
  EXPECT_EQ(status_of(chunked.response), 200) << chunked.response;
  EXPECT_NE(chunked.response.find("\"completion_tokens\":4"), std::string::npos)
      << chunked.response;
}

TEST(HostileHttp, PipelinedRequestsAnsweredInOrder) {
  FakeServer s;
  std::string body = R"({"prompt":"abc","max_tokens":3})";
  std::string post =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n" + body;
  std::string chunked =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
      hex(body.size()) + "\r\n" + body + "\r\n0\r\n\r\n";
  std::string all = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n" + post +
                    "GET /v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n" + chunked +
                    "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  Exchange ex = exchange(s.port, all, 10);
  EXPECT_TRUE(ex.closed);
  auto rs = split_responses(ex.response);
  ASSERT_EQ(rs.size(), 5u) << ex.response;
  std::vector<int> statuses;
  for (auto& r : rs) statuses.push_back(r.first);
  EXPECT_EQ(statuses, (std::vector<int>{200, 200, 404, 200, 200}));
  EXPECT_NE(rs[0].second.find("\"ok\""), std::string::npos);
  auto text = [](const std::string& b) { return nlohmann::json::parse(b)["choices"][0]["text"]; };
  EXPECT_EQ(text(rs[1].second), text(rs[3].second)) << "the same request, framed two ways";
  EXPECT_NE(rs[4].second.find("fake-model"), std::string::npos);
  EXPECT_EQ(s.fake->submits.load(), 2);
}

TEST(HostileHttp, SlowConnectionsDoNotStarveHealth) {
  FakeServer s(deadlines_out_of_reach());  // the slow heads stay open throughout
  constexpr int kSlow = 500;
  SlowClients slow(s.port, kSlow, std::chrono::milliseconds(100));
  ASSERT_EQ(slow.connected(), kSlow);
  std::string m;
  for (int i = 0; i < 500 && metric_value(m, "invar_http_connections_open") < kSlow; ++i) {
    m = s.get("/metrics")->body;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GE(metric_value(m, "invar_http_connections_open"), kSlow)
      << "the slow connections are not all open";
  // Every probe answered (each gives up after 5 s) while every slow connection is still open:
  // /health did not wait for them to finish or time out.
  const int ok = probe_health(s.port, 20, std::chrono::milliseconds(50)).first;
  EXPECT_EQ(ok, 20) << "/health starved while " << kSlow << " connections dripped their heads";
  EXPECT_GE(metric_value(s.get("/metrics")->body, "invar_http_connections_open"), kSlow)
      << "slow connections closed before the probes were done";
}

// How many times the kernel retransmitted on this TCP socket (a SYN counts).
uint32_t retransmits(int fd) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return ~0u;
  return info.tcpi_total_retrans;
}

TEST(HostileHttp, BurstOfConnectsIsQueued) {
  FakeServer s;
  std::vector<int> fds;
  for (int i = 0; i < 300; ++i)  // faster than the server accepts: the listen backlog holds them
    fds.push_back(connect_local(s.port));
  // An overflowing backlog drops the SYN, and the connect completes only after the kernel
  // retransmits it: counted on the socket, whatever the time it took.
  int retried = 0;
  for (int fd : fds) retried += fd < 0 || retransmits(fd) > 0;
  EXPECT_EQ(retried, 0) << "connects needed a SYN retry: the backlog overflowed";
  int answered = 0;
  for (int fd : fds) {
    send_all(fd, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    char buf[64] = {};
    answered += ::recv(fd, buf, sizeof buf - 1, 0) > 0 && status_of(buf) == 200;
    ::close(fd);
  }
  EXPECT_EQ(answered, 300);
}

TEST(HostileHttp, HugeChunkedUploadGets413WithoutBuffering) {
  FakeServer s;  // 4 MiB body limit
  const size_t kTotal = size_t(100) << 20;
  int64_t rss0 = rss_kib();
  Exchange ex = exchange(
      s.port, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 60,
      chunked_filler(kTotal));
  int64_t grown_kib = rss_kib() - rss0;
  EXPECT_EQ(status_of(ex.response), 413) << ex.response.substr(0, 300);
  EXPECT_NE(ex.response.find("4194304 bytes"), std::string::npos);
  EXPECT_TRUE(ex.closed);
  EXPECT_LT(ex.sent, kTotal / 2) << "the server read on past its limit";
  EXPECT_LT(grown_kib, 20 * 1024) << "resident memory grew by " << grown_kib << " KiB";
  EXPECT_EQ(s.get("/health")->status, 200);
}

TEST(HostileHttp, ConnectionCapGives503) {
  ServerConfig cfg = deadlines_out_of_reach();  // the 503 cannot wait for one
  cfg.max_connections = 8;
  cfg.client_max_connections = 8;  // every connection here comes from one address
  FakeServer s(cfg);
  std::vector<int> fds;
  for (int i = 0; i < 8; ++i) fds.push_back(connect_local(s.port));
  Exchange over = exchange(s.port, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", 5);
  EXPECT_EQ(status_of(over.response), 503) << over.response;
  EXPECT_NE(over.response.find("limit of 8 connections"), std::string::npos) << over.response;
  EXPECT_TRUE(over.closed);
  ::close(fds.back());
  fds.pop_back();
  int status = 0;
  for (int i = 0; i < 200 && status != 200; ++i) {
    status = status_of(
        exchange(s.port, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 5)
            .response);
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(status, 200) << "a freed slot is not reused";
  for (int fd : fds) ::close(fd);
}

TEST(HostileHttp, HeadAndBodyDeadlines) {
  ServerConfig cfg;
  cfg.head_timeout_s = 0.5;
  cfg.body_stall_s = 0.5;  // a body that stops coming, long before its 30 s deadline
  FakeServer s(cfg);
  Exchange head = exchange(s.port, "GET /health HTTP/1.1\r\nHost: x\r\n", 10);
  EXPECT_EQ(status_of(head.response), 408) << head.response;
  EXPECT_TRUE(head.closed);
  EXPECT_GT(head.seconds, 0.4) << "answered before its deadline";
  Exchange body = exchange(
      s.port, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{", 10);
  EXPECT_EQ(status_of(body.response), 408) << body.response;
  EXPECT_TRUE(body.closed);
  EXPECT_EQ(s.fake->submits.load(), 0);
}

TEST(HostileHttp, DisconnectCancelsWholeAndStreamedRequests) {
  FakeServer s({}, false, [](FakeBackend& f) { f.token_delay = std::chrono::milliseconds(5); });
  for (bool stream : {false, true}) {
    std::string body = std::string(R"({"prompt":"abc","max_tokens":200,"stream":)") +
                       (stream ? "true}" : "false}");
    int fd = hold_request(s, body);
    ASSERT_EQ(s.fake->active(), 1);
    EXPECT_EQ(metric_value(s.get("/metrics")->body, "invar_cache_referenced_blocks"), 1);
    ::close(fd);
    for (int i = 0; i < 400 && s.fake->active() > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(s.fake->active(), 0)
        << (stream ? "stream" : "whole") << ": ran on after its client left";
    std::string m = s.get("/metrics")->body;
    EXPECT_EQ(metric_value(m, "invar_cache_referenced_blocks"), 0) << m;
    EXPECT_EQ(metric_value(m, "invar_requests_running"), 0) << m;
    EXPECT_EQ(metric_value(m, "invar_requests_cancelled_total"), stream ? 2 : 1) << m;
    for (int i = 0; i < 200 && metric_value(m, "invar_server_inflight_requests") != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      m = s.get("/metrics")->body;
    }
    EXPECT_EQ(metric_value(m, "invar_server_inflight_requests"), 0) << m;
  }
}

}  // namespace http_hostile_test
