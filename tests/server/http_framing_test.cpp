// The strict head scanner on its own: a head fed one byte at a time reads as it does whole,
// fields keep their trailing whitespace, and every error carries its status.
#include "server/http_framing.h"

#include <gtest/gtest.h>

namespace http_framing_test {

using namespace invar::server;

TEST(HeadScanner, ByteAtATimeEqualsWhole) {
  std::string head =
      "\r\nPOST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nAuthorization:  Bearer k \r\n"
      "Content-Length: 2\r\n\r\n{}";
  HeadScanner whole, bytes;
  ASSERT_EQ(whole.scan(head), HeadScanner::Result::complete);
  HeadScanner::Result r = HeadScanner::Result::need_more;
  for (size_t n = 1; n <= head.size() && r == HeadScanner::Result::need_more; ++n)
    r = bytes.scan(head.substr(0, n));
  ASSERT_EQ(r, HeadScanner::Result::complete);
  for (const HeadScanner* s : {&whole, &bytes}) {
    const RequestHead& h = s->head();
    EXPECT_EQ(h.method, "POST");
    EXPECT_EQ(h.target, "/v1/completions?x=1");
    EXPECT_EQ(h.version, "HTTP/1.1");
    EXPECT_EQ(h.bytes, head.size() - 2);
    ASSERT_EQ(h.fields.size(), 3u);
    EXPECT_EQ(*h.field("authorization"), "Bearer k ") << "trailing whitespace is kept";
    EXPECT_EQ(h.count("HOST"), 1u);
  }
}

TEST(HeadScanner, ErrorsCarryTheirStatus) {
  HeadLimits small;
  small.max_head_bytes = 64;
  small.max_fields = 2;
  small.max_target = 8;
  auto status = [&](const std::string& in) {
    HeadScanner s(small);
    return s.scan(in) == HeadScanner::Result::error ? s.error_status() : 0;
  };
  EXPECT_EQ(status("GET /123456789 HTTP/1.1\r\n"), 414);
  EXPECT_EQ(status("GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n"), 431);
  EXPECT_EQ(status("GET / HTTP/1.1\r\nA: " + std::string(100, 'a')), 431);
  EXPECT_EQ(status("GET / HTTP/1.1\nHost: a\r\n\r\n"), 400);
  EXPECT_EQ(status("GET / HTTP/1.1\r\nHost: a\r\n"), 0) << "incomplete, not wrong";
  EXPECT_EQ(status("GET / HTTP/1.0\r\n\r\n"), 0) << "HTTP/1.0 needs no Host";
}

}  // namespace http_framing_test
