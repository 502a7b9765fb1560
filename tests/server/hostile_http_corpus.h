// The hostile-HTTP corpus: request framing an attacker (or a confused proxy) might send, as raw
// bytes, each with the status it must get at once. Every case is answered and the connection
// closed without waiting for a timeout: none of them ends the head, or they end it with an
// error the server can see.
#pragma once

#include <string>
#include <vector>

namespace invar::server::testing {

struct HostileCase {
  std::string name;
  std::string bytes;
  int status;
};

inline std::vector<HostileCase> hostile_http_corpus() {
  std::vector<HostileCase> v;
  auto add = [&](std::string name, std::string bytes, int status) {
    v.push_back({std::move(name), std::move(bytes), status});
  };
  const std::string ok_line = "GET /health HTTP/1.1\r\n";
  const std::string host = "Host: x\r\n";
  const std::string post = "POST /v1/completions HTTP/1.1\r\nHost: x\r\n";
  const std::string body = R"({"prompt":"a"})";

  // Request line: methods, targets, versions.
  for (const char* m :
       {"get", "G@T", "GE T", "G\tET", "BREW", "GETT", "PRI", "\x01GET", "G\x7f", "GET\x80",
        "[GET]", "GET:", "POST/", "\"GET\"", "GETGETGETGETGETGETGETGETGET"})
    add(std::string("method ") + m, std::string(m) + " /health HTTP/1.1\r\n" + host + "\r\n", 400);
  add("no method", " /health HTTP/1.1\r\n\r\n", 400);
  add("no target", "GET  HTTP/1.1\r\n\r\n", 400);
  add("only method", "GET\r\n\r\n", 400);
  add("HTTP/0.9 style", "GET /health\r\n\r\n", 400);
  for (const char* ver :
       {"HTTP/1.2", "HTTP/2.0", "HTTP/3", "HTTP/1", "HTTP/1.", "http/1.1", "HTTP/1.1 ", "HTTP/1.10",
        "HTTP/01.1", "HTTPS/1.1", "HTTP/1.1\t", "HTTP/ 1.1", "XTTP/1.1", "HTTP/9.9"})
    add(std::string("version ") + ver, std::string("GET /health ") + ver + "\r\n" + host + "\r\n",
        400);
  add("two spaces before version", "GET /health  HTTP/1.1\r\n\r\n", 400);
  add("space in target", "GET /hea lth HTTP/1.1\r\n\r\n", 400);
  for (int c : {0x00, 0x01, 0x09, 0x0b, 0x1f, 0x7f, 0x80, 0xff})
    add("byte in target " + std::to_string(c),
        "GET /he" + std::string(1, char(c)) + "alth HTTP/1.1\r\n\r\n", 400);
  add("100 KB target", "GET /" + std::string(100 * 1024, 'a') + " HTTP/1.1\r\n" + host + "\r\n",
      414);
  add("bare LF request line", "GET /health HTTP/1.1\n" + host + "\r\n", 400);
  add("bare LF everywhere", "GET /health HTTP/1.1\nHost: x\n\n", 400);
  add("CR without LF in request line", "GET /health HTTP/1.1\rHost: x\r\n\r\n", 400);
  add("TLS hello", std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11), 400);
  add("HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400);

  // Header lines.
  add("line without colon", ok_line + host + "NoColonHere\r\n\r\n", 400);
  add("line without colon, then value", ok_line + host + "X-A value\r\n\r\n", 400);
  add("space before colon", ok_line + host + "X-A : v\r\n\r\n", 400);
  add("tab before colon", ok_line + host + "X-A\t: v\r\n\r\n", 400);
  add("empty name", ok_line + host + ": v\r\n\r\n", 400);
  add("obs-fold space", ok_line + host + "X-A: a\r\n b\r\n\r\n", 400);
  add("obs-fold tab", ok_line + host + "X-A: a\r\n\tb\r\n\r\n", 400);
  add("obs-fold first line", ok_line + " Host: x\r\n\r\n", 400);
  add("bare LF after field", ok_line + "Host: x\nX-A: b\r\n\r\n", 400);
  add("bare LF ends head", ok_line + host + "\n", 400);
  add("CR without LF in field", ok_line + host + "X-A: a\rb\r\n\r\n", 400);
  add("CR CR LF", ok_line + host + "X-A: a\r\r\n\r\n", 400);
  add("bad final CR", ok_line + host + "\rX", 400);
  for (int c = 0; c < 0x20; ++c) {
    if (c == '\t' || c == '\r' || c == '\n') continue;
    add("control byte in value " + std::to_string(c),
        ok_line + host + "X-A: a" + std::string(1, char(c)) + "b\r\n\r\n", 400);
  }
  add("DEL in value",
      ok_line + host +
          "X-A: a\x7f"
          "b\r\n\r\n",
      400);
  const char nul_auth[] = "Authorization: Bearer k\0junk\r\n\r\n";
  add("NUL then junk in Authorization", ok_line + host + std::string(nul_auth, sizeof nul_auth - 1),
      400);
  for (int c : {0x00, 0x01, 0x09, 0x0b, 0x20, 0x22, 0x28, 0x2c, 0x2f, 0x3b, 0x3d, 0x40, 0x5b, 0x7b,
                0x7f, 0x80, 0xc3, 0xff})
    add("byte in name " + std::to_string(c),
        ok_line + host + "X-" + std::string(1, char(c)) + "A: v\r\n\r\n", 400);
  add(
      "101 header fields",
      [&] {
        std::string s = ok_line + host;
        for (int i = 0; i < 101; ++i) s += "X-F" + std::to_string(i) + ": v\r\n";
        return s + "\r\n";
      }(),
      431);
  add(
      "100 000 header fields",
      [&] {
        std::string s = ok_line + host;
        for (int i = 0; i < 100000; ++i) s += "X: v\r\n";
        return s + "\r\n";
      }(),
      431);
  add("1 MB header value", ok_line + host + "X-Big: " + std::string(1 << 20, 'a') + "\r\n\r\n",
      431);
  add("1 MB header name", ok_line + host + std::string(1 << 20, 'A') + ": v\r\n\r\n", 431);
  add("missing Host on HTTP/1.1", ok_line + "\r\n", 400);
  add("two Hosts", ok_line + host + host + "\r\n", 400);

  // Body framing.
  auto cl = [&](const std::string& v) { return post + "Content-Length: " + v + "\r\n\r\n" + body; };
  add("two different Content-Length",
      post + "Content-Length: 14\r\nContent-Length: 15\r\n\r\n" + body, 400);
  add("two equal Content-Length", post + "Content-Length: 14\r\nContent-Length: 14\r\n\r\n" + body,
      400);
  add("Content-Length list", cl("14, 14"), 400);
  for (const char* v : {"-5", "+14", "0x0e", "14.0", "1 4", "fourteen", "", "99999999999999999999",
                        "\t14x", "14;", "1e1"})
    add(std::string("Content-Length '") + v + "'", cl(v), 400);
  add("TE and CL",
      post + "Transfer-Encoding: chunked\r\nContent-Length: 14\r\n\r\ne\r\n" + body +
          "\r\n0\r\n\r\n",
      400);
  add("CL and TE",
      post + "Content-Length: 14\r\nTransfer-Encoding: chunked\r\n\r\ne\r\n" + body +
          "\r\n0\r\n\r\n",
      400);
  for (const char* te : {"gzip", "identity", "chunked, gzip", "gzip, chunked", "chunked, chunked",
                         "x-custom", "chunked;q=1", "\"chunked\"", "chunk", "deflate"})
    add(std::string("Transfer-Encoding ") + te,
        post + "Transfer-Encoding: " + te + "\r\n\r\n0\r\n\r\n", 400);
  add("two Transfer-Encoding",
      post + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400);
  add("TE on HTTP/1.0",
      "POST /v1/completions HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400);
  auto chunked = [&](const std::string& chunks) {
    return post + "Transfer-Encoding: chunked\r\n\r\n" + chunks;
  };
  add("chunk size not hex", chunked("zz\r\n" + body + "\r\n0\r\n\r\n"), 400);
  add("chunk size negative", chunked("-e\r\n" + body + "\r\n0\r\n\r\n"), 400);
  add("chunk size overflow", chunked("fffffffffffffffffffff\r\n" + body + "\r\n0\r\n\r\n"), 400);
  add("chunk without CRLF after data", chunked("e\r\n" + body + "XX0\r\n\r\n"), 400);
  add("endless chunk extension", chunked("5;" + std::string(64 * 1024, 'a')), 400);
  add("endless trailer", chunked("0\r\nX-T: " + std::string(64 * 1024, 'a')), 400);
  add("chunked over the body limit", chunked("ffff\r\n" + std::string(0xffff, 'a') + "\r\n"), 413);
  add("Content-Length over the body limit", cl("9999999999"), 413);
  add("Content-Length over the limit, no body", post + "Content-Length: 65537\r\n\r\n", 413);
  return v;
}

}  // namespace invar::server::testing
