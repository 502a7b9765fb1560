// Longer hostile runs (CTest label "soak", outside `make test`): thousands of slow connections
// for half a minute, and four 256 MiB chunked uploads at once.
#include <gtest/gtest.h>

#include <thread>

#include "fake_server.h"
#include "http_test_util.h"

namespace http_hostile_soak_test {

using namespace invar::server;
using namespace invar::server::testing;

TEST(HostileSoak, ThousandsOfSlowConnections) {
  FakeServer s;
  SlowClients slow(s.port, 3000, std::chrono::milliseconds(200));
  ASSERT_EQ(slow.connected(), 3000);
  std::string m;
  for (int i = 0; i < 1000 && metric_value(m, "invar_http_connections_open") < 3000; ++i) {
    m = s.get("/metrics")->body;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GE(metric_value(m, "invar_http_connections_open"), 3000);
  auto [ok, worst] = probe_health(s.port, 300, std::chrono::milliseconds(100));  // 30 s and more
  EXPECT_EQ(ok, 300);
  EXPECT_LT(worst, 0.2);
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

}  // namespace http_hostile_soak_test
