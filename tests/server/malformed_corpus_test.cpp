// A corpus of malformed requests, sent as raw bytes: every one gets a 4xx with an OpenAI error
// body, and the server keeps serving afterwards.
#include "malformed_corpus.h"

#include <gtest/gtest.h>

#include "fake_server.h"
#include "http_test_util.h"

namespace malformed_corpus_test {

using namespace invar::server::testing;

TEST(MalformedCorpus, AllRejectedWith4xxAndServerStaysUp) {
  FakeServer s;
  auto cases = malformed_corpus();
  ASSERT_GE(cases.size(), 60u);
  int i = 0;
  for (auto& c : cases) {
    std::string resp = raw_post(s.port, c.path, c.body);
    int status = status_of(resp);
    EXPECT_GE(status, 400) << "case " << i << ": " << c.body.substr(0, 120);
    EXPECT_LT(status, 500) << "case " << i << ": " << c.body.substr(0, 120) << "\n" << resp;
    EXPECT_NE(resp.find("{\"error\":{"), std::string::npos) << "case " << i << ": no error body";
    ++i;
  }
  auto h = s.get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(s.post("/v1/completions", R"({"prompt":"a","max_tokens":2})")->status, 200);
  EXPECT_EQ(s.fake->submits.load(), 1) << "a malformed request reached the engine";
}

TEST(MalformedCorpus, GarbageRequestLinesDoNotKillTheServer) {
  FakeServer s;
  for (const char* raw :
       {"GARBAGE\r\n\r\n", "POST /v1/completions HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
        "POST /v1/completions HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
        "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"}) {
    int fd = connect_local(s.port);
    ASSERT_GE(fd, 0);
    send_all(fd, raw);
    ::shutdown(fd, SHUT_WR);  // no more bytes: the server need not wait out its read timeout
    char buf[256];
    ::recv(fd, buf, sizeof buf, 0);
    ::close(fd);
  }
  EXPECT_EQ(s.get("/health")->status, 200);
}

}  // namespace malformed_corpus_test
