// The event-driven HTTP/1.1 connection layer under `invar serve` (Boost.Beast on Asio, kept
// inside http_transport.cpp): a few IO threads serve every connection, so idle or slow clients
// cost memory, not threads. It frames requests strictly (http_framing.h), enforces the
// per-connection deadlines and the size limits (bodies, chunked ones included), answers
// pipelined requests in order, and hands each complete request to a RequestHandler. Work that
// takes time (a completion) comes back as a PendingReply that the connection polls whenever the
// work wakes it: no IO thread ever waits on the engine.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/http_framing.h"

namespace invar::server {

struct TransportConfig {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port
  HeadLimits head;
  size_t max_body_bytes = 4u << 20;  // → 413 the moment a body (chunked or not) crosses it
  int max_connections = 4096;        // beyond: 503 and close
  int max_connections_per_peer = 0;  // beyond, from one address: 429 and close (0: three
                                     // quarters of max_connections, client_limits.h)
  double head_timeout_s = 10;        // first byte of a request → end of its head (else 408)
  double body_timeout_s = 30;        // end of the head → end of the body (else 408)
  double body_stall_s = 5;           // no body byte for this long → 408
  double idle_timeout_s = 30;        // a kept-alive connection with no request is closed
  double write_timeout_s = 30;       // one response write stalled this long → connection dropped
  int io_threads = 2;
  // CORS: a request whose Origin is listed ("*": any) gets Access-Control-Allow-Origin on its
  // response, streamed or not. Empty: no CORS headers at all.
  std::vector<std::string> allowed_origins;
};

struct HttpRequest {
  RequestHead head;
  std::string path;  // the target without its query
  std::string body;
  std::string peer;  // the client's address ("" when unknown)
};

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::string headers = {};  // extra header lines, each ending in CRLF
};

// A response still being produced. Called only on its connection's strand, never concurrently.
class PendingReply {
 public:
  virtual ~PendingReply() = default;
  // Whether streaming() is known yet (a request still being prepared off the IO threads may not
  // know); the connection asks again whenever it is woken.
  virtual bool decided() const { return true; }
  // A stream is sent as 200 text/event-stream pieces; otherwise one reply() at the end. Asked
  // only once decided().
  virtual bool streaming() const = 0;
  // Never blocks. Appends what is ready (stream pieces) to *out and returns true once the
  // response is complete. `tick`: no wake-up came for a while (a stream may send a keep-alive).
  virtual bool poll(bool tick, std::string* out) = 0;
  virtual HttpReply reply() = 0;   // not streaming: the response, once poll returned true
  virtual void client_gone() = 0;  // the connection closed before the response was complete
};

struct Routed {
  HttpReply reply;  // sent at once when `pending` is null
  std::unique_ptr<PendingReply> pending;
};

// Thread-safe and cheap: makes the request's connection poll its PendingReply soon.
using Waker = std::function<void()>;
using RequestHandler = std::function<Routed(const HttpRequest&, const Waker&)>;
// Every response's endpoint and status; `refusal` is set (with what was wrong) when the transport
// itself refused the request — a framing error, a limit, a deadline — and no handler saw it.
// `method` and `path` are "" when the head was not read far enough to know them.
using ResponseLogger = std::function<void(const std::string& method, const std::string& path,
                                          int status, const std::string* refusal)>;

class HttpTransport {
 public:
  HttpTransport(TransportConfig cfg, RequestHandler handler, ResponseLogger logger);
  ~HttpTransport();  // stop()s
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  int bind();    // listens (backlog 4096); returns the port. Throws invar::Error.
  void start();  // starts the IO threads
  // Stops accepting, closes every connection (a PendingReply still open hears client_gone)
  // and joins the IO threads. Idempotent.
  void stop();
  int connections() const;
  uint64_t peer_refusals() const;  // connections refused at max_connections_per_peer

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace invar::server
