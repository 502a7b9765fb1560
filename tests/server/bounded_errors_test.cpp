// Errors and logs are bounded whatever a request holds: an echoed value is cut to a few hundred
// bytes with "… (N bytes)", an error body stays under 1 KiB for a 2 MB bad field, a request-log
// line never exceeds kRequestLogLineBytes, and every request the transport refuses (413, 408,
// framing errors) still gets its log line.
#include <gtest/gtest.h>

#include <thread>

#include "fake_server.h"
#include "http_test_util.h"
#include "server/api_error.h"
#include "server/request_log.h"

namespace bounded_errors_test {

using namespace invar::server;
using namespace invar::server::testing;
using json = nlohmann::json;

namespace {

// The responses /metrics has counted, its own reads left out.
double responses_counted(const FakeServer& s) {
  const std::string m = s.get("/metrics")->body;
  const std::string name = "invar_http_responses_total{endpoint=\"";
  double n = 0;
  for (size_t at = m.find(name); at != std::string::npos; at = m.find(name, at + 1)) {
    if (m.compare(at + name.size(), 9, "/metrics\"") == 0) continue;
    n += std::atof(m.c_str() + m.find(' ', at) + 1);
  }
  return n;
}

// The request-log lines (text format) of the `responses` responses `f` gets, /metrics's left
// out. A refusal's line is written as it is sent, maybe after the client has it: the lines are
// read once /metrics counts them (the server logs a response before counting it).
template <class F>
std::vector<std::string> log_lines_of(const FakeServer& s, int responses, F&& f) {
  const double before = responses_counted(s);
  ::testing::internal::CaptureStderr();
  f();
  for (int i = 0; i < 3000 && responses_counted(s) < before + responses; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // a hang guard of 30 s
  const std::string err = ::testing::internal::GetCapturedStderr();
  std::vector<std::string> lines;
  for (size_t at = 0; at < err.size();) {
    size_t end = err.find('\n', at);
    if (end == std::string::npos) end = err.size();
    const std::string line = err.substr(at, end - at);
    if (line.rfind("invar serve: request ", 0) == 0 &&
        line.find("endpoint=/metrics ") == std::string::npos)
      lines.push_back(line);
    at = end + 1;
  }
  return lines;
}

TEST(BoundedErrors, EchoCutSaysHowLongTheValueWas) {
  EXPECT_EQ(echo_cut("short"), "short");
  const std::string big(5000, 'x');
  EXPECT_EQ(echo_cut(big), std::string(kEchoBytes, 'x') + "… (5000 bytes)");
  // Never half a character: "é" is 2 bytes, the cut backs off to its start.
  const std::string accents = std::string(255, 'a') + "éé";
  EXPECT_EQ(echo_cut(accents), std::string(255, 'a') + "… (259 bytes)");
  ApiError e = bad_request(std::string(1 << 20, 'p'), std::string(2 << 20, 'm'));
  EXPECT_LT(e.to_json().size(), 1024u);
  EXPECT_NE(e.to_json().find("(2097152 bytes)"), std::string::npos);
}

TEST(BoundedErrors, RequestLogLineHasAFixedMaximum) {
  RequestRecord r;
  r.id = "cmpl-" + std::string(300, 'i');
  r.method = "POST";
  r.path = "/v1/completions";
  r.status = 400;
  r.model = std::string(1 << 20, 'm');
  r.user = std::string(256, '\n');  // escapes grow it sixfold
  r.error = std::string(2 << 20, '\x01');
  for (LogFormat f : {LogFormat::text, LogFormat::json}) {
    const std::string line = request_log_line(r, f);
    EXPECT_LE(line.size(), kRequestLogLineBytes);
    EXPECT_EQ(line.find('\n'), std::string::npos);
    EXPECT_NE(line.find("bytes)"), std::string::npos) << line;
    if (f == LogFormat::json) {
      const json j = json::parse(line);
      EXPECT_EQ(j["status"], 400);
    }
  }
}

TEST(BoundedErrors, TwoMegabyteBadFieldsGetSmallErrorsAndSmallLogLines) {
  FakeServer s;
  const std::string big(2 << 20, 'z');
  json bias = json::object();
  for (int i = 0; i < 150000; ++i) bias[std::to_string(i)] = 1;  // ~2 MB of logit_bias
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/v1/completions", json{{"prompt", "a"}, {"logit_bias", bias}}.dump()},
      {"/v1/completions", json{{"prompt", "a"}, {big, 1}}.dump()},
      {"/v1/completions", json{{"prompt", "a"}, {"model", big}}.dump()},
      {"/v1/completions", json{{"prompt", "a"}, {"response_format", {{"type", big}}}}.dump()},
      {"/v1/chat/completions", json{{"messages", {{{"role", big}, {"content", "a"}}}}}.dump()},
      {"/tokenize", json{{"prompt", "a"}, {"model", big}}.dump()},
  };
  std::vector<std::string> lines = log_lines_of(s, int(cases.size()), [&] {
    for (const auto& [path, body] : cases) {
      ASSERT_GT(body.size(), 1u << 20);
      auto r = s.post(path, body);
      ASSERT_TRUE(r) << path;
      EXPECT_TRUE(r->status == 400 || r->status == 404)
          << r->status << " " << r->body.substr(0, 300);
      EXPECT_LE(r->body.size(), 1024u) << path << ": " << r->body.substr(0, 300);
      // A 2 MB logit_bias is refused for its first out-of-vocabulary id, which echoes nothing
      // long; a constraint field for its size, before it is read; every other case echoes its
      // value cut short.
      if (body.find("response_format") != std::string::npos) {
        EXPECT_NE(r->body.find("max_input_bytes"), std::string::npos) << r->body.substr(0, 300);
      } else if (body.find("logit_bias") == std::string::npos) {
        EXPECT_NE(r->body.find(" bytes)"), std::string::npos) << r->body.substr(0, 300);
      }
    }
  });
  EXPECT_EQ(lines.size(), cases.size());
  for (const std::string& l : lines) EXPECT_LE(l.size(), kRequestLogLineBytes);
}

TEST(BoundedErrors, RequestsTheTransportRefusesAreLogged) {
  ServerConfig cfg;
  cfg.max_body_bytes = 1000;
  cfg.body_stall_s = 0.2;
  FakeServer s(cfg);
  std::vector<std::string> lines = log_lines_of(s, 3, [&] {
    EXPECT_EQ(status_of(raw_post(s.port, "/v1/completions", std::string(2000, 'a'))), 413);
    // A declared body that never comes: 408 after the stall.
    Exchange slow =
        exchange(s.port,
                 "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n"
                 "{\"pro",
                 3);
    EXPECT_EQ(status_of(slow.response), 408) << slow.response;
    Exchange bad = exchange(s.port, "GET /health HTTP/1.1\r\nHost: x\r\nBad Field: 1\r\n\r\n", 3);
    EXPECT_EQ(status_of(bad.response), 400) << bad.response;
  });
  auto has = [&](const std::string& a, const std::string& b) {
    for (const std::string& l : lines)
      if (l.find(a) != std::string::npos && l.find(b) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has("status=413", "endpoint=/v1/completions")) << ::testing::PrintToString(lines);
  EXPECT_TRUE(has("status=408", "stalled")) << ::testing::PrintToString(lines);
  EXPECT_TRUE(has("status=400", "error=")) << ::testing::PrintToString(lines);
}

}  // namespace

}  // namespace bounded_errors_test
