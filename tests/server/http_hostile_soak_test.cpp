// Longer hostile runs (CTest label "soak", outside `make test`): thousands of slow connections
// for half a minute, and four 256 MiB chunked uploads at once.
#include <gtest/gtest.h>

#include <thread>

#include "fake_server.h"
#include "http_test_util.h"

using namespace invar::server;
using namespace invar::server::testing;

TEST(HostileSoak, ThousandsOfSlowConnections) {
  FakeServer s;
  constexpr int kSlow = 3000;
  std::vector<int> fds;
  for (int i = 0; i < kSlow; ++i) {
    int fd = connect_local(s.port);
    ASSERT_GE(fd, 0) << "connect " << i;
    send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ");
    fds.push_back(fd);
  }
  std::atomic<bool> stop{false};
  std::thread drip([&] {
    while (!stop) {
      for (int fd : fds) ::send(fd, "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  double worst = 0;
  int ok = 0, probes = 0;
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       std::chrono::steady_clock::now() < end;) {
    Exchange ex =
        exchange(s.port, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 5);
    ok += status_of(ex.response) == 200;
    ++probes;
    worst = std::max(worst, ex.seconds);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  stop = true;
  drip.join();
  EXPECT_EQ(ok, probes);
  EXPECT_LT(worst, 0.2);
  for (int fd : fds) ::close(fd);
}

TEST(HostileSoak, ParallelHugeChunkedUploads) {
  FakeServer s;
  int64_t rss0 = rss_kib();
  std::vector<Exchange> got(4);
  std::vector<std::thread> ts;
  for (auto& g : got)
    ts.emplace_back([&] {
      g = exchange(s.port,
                   "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
                   120, chunked_filler(size_t(256) << 20));
    });
  for (auto& t : ts) t.join();
  int64_t grown_kib = rss_kib() - rss0;
  for (auto& g : got) EXPECT_EQ(status_of(g.response), 413);
  EXPECT_LT(grown_kib, 40 * 1024);
}
