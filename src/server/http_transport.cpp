// Every use of Boost.Asio and Boost.Beast in invar lives in this file (they are heavy to compile).
#include "server/http_transport.h"

#include <sys/resource.h>

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstdio>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "core/error.h"
#include "server/api_error.h"
#include "server/client_limits.h"
#include "server/cors.h"

namespace invar::server {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

constexpr size_t kReadChunk = 8 * 1024;
constexpr size_t kMaxReadAhead = 1 << 20;  // pipelined bytes held while a response is produced
constexpr auto kStreamTick = std::chrono::milliseconds(500);
// After an error reply the connection half-closes and discards input for a moment, so that the
// client reads the reply before the close resets the connection.
constexpr auto kLinger = std::chrono::seconds(1);
constexpr size_t kLingerBytes = 1 << 20;

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

std::string status_line(int status) {
  auto reason = http::obsolete_reason(http::int_to_status(unsigned(status)));
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason.data(), reason.size()) +
         "\r\n";
}

std::string reply_text(const HttpReply& r, bool keep_alive, bool head_only,
                       const std::string& cors = std::string()) {
  std::string out = status_line(r.status) + "Content-Type: " + r.content_type +
                    "\r\nContent-Length: " + std::to_string(r.body.size()) + "\r\n" + r.headers +
                    cors +
                    // Said even on HTTP/1.1, where it is the default: an HTTP/1.0 client needs it.
                    (keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n") + "\r\n";
  if (!head_only) out += r.body;
  return out;
}

HttpReply error_reply(int status, const std::string& message) {
  return {status, "application/json",
          ApiError{status, message, "invalid_request_error", "", ""}.to_json()};
}

class Connection;

// What every connection shares with the transport.
struct Shared {
  TransportConfig cfg;
  RequestHandler handler;
  ResponseLogger logger;
  std::mutex mu;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> live;
  ClientSlots peers;  // open connections per peer address (when max_connections_per_peer binds)
  std::atomic<uint64_t> peer_refusals{0};
};

// The engine's side of a connection: wakes are posted to the connection's strand until the
// connection (or the transport) is gone. Wakes coalesce while one is queued.
//
// The engine may hold the slot (in a request's event callback) after the connection and the
// io_context are gone: a finished request's callback is released by the engine thread some time
// after its last event. The strand executor refers to the io_context's strand service, so
// close() drops it while the io_context lives; a slot released later holds no executor.
struct WakeSlot {
  std::mutex mu;
  bool closed = false;
  std::atomic<bool> queued{false};
  asio::any_io_executor executor;
  std::weak_ptr<Connection> conn;

  void close() {
    std::lock_guard<std::mutex> lock(mu);
    closed = true;
    executor = asio::any_io_executor();
  }
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // `peer_counted`: the connection holds one of its peer's slots in sh->peers.
  Connection(std::shared_ptr<Shared> sh, tcp::socket sock, std::string peer, bool peer_counted)
      : sh_(std::move(sh)),
        sock_(std::move(sock)),
        read_timer_(sock_.get_executor()),
        write_timer_(sock_.get_executor()),
        tick_timer_(sock_.get_executor()),
        scanner_(sh_->cfg.head),
        wake_(std::make_shared<WakeSlot>()),
        peer_(std::move(peer)),
        peer_counted_(peer_counted) {}
  ~Connection() {
    wake_->close();
    if (peer_counted_) sh_->peers.release(peer_);
    std::lock_guard<std::mutex> lock(sh_->mu);
    sh_->live.erase(this);
  }

  void start() {
    {
      std::lock_guard<std::mutex> lock(sh_->mu);
      sh_->live[this] = weak_from_this();
    }
    wake_->executor = sock_.get_executor();
    wake_->conn = weak_from_this();
    error_code ec;
    sock_.set_option(tcp::no_delay(true), ec);
    arm_read_timer(sh_->cfg.idle_timeout_s);
    read();
  }

  // The transport is stopping and its IO threads are joined: close without ceremony.
  void detach() { close(); }

 private:
  enum class Phase { idle, head, body, responding, closing };

  void read() {
    if (reading_ || closed_) return;
    reading_ = true;
    sock_.async_read_some(
        asio::buffer(rbuf_),
        [self = shared_from_this()](error_code ec, size_t n) { self->on_read(ec, n); });
  }

  void on_read(error_code ec, size_t n) {
    reading_ = false;
    if (closed_) return;
    if (phase_ == Phase::closing || failed_) {  // input is discarded
      linger_bytes_ += n;
      if (!ec && linger_bytes_ <= kLingerBytes) return read();
      if (phase_ == Phase::closing) close();  // else the reply is still being written: it closes
      return;
    }
    if (ec) {
      // The client closed (or reset) its side: whatever it asked for is abandoned.
      if (phase_ == Phase::body || (phase_ == Phase::head && ec == asio::error::eof))
        return fail(400, "the connection ended inside a request");
      return close();
    }
    in_.append(rbuf_.data(), n);
    process();
  }

  void process() {
    if (closed_ || failed_ || phase_ == Phase::closing) return;
    if (phase_ == Phase::responding) {  // keep reading: a disconnect must be seen at once
      if (in_.size() < kMaxReadAhead) read();
      return;
    }
    if (phase_ == Phase::idle) {
      if (in_.empty()) return read();
      phase_ = Phase::head;
      method_.clear();
      path_.clear();
      arm_read_timer(sh_->cfg.head_timeout_s);
    }
    if (phase_ == Phase::head) {
      auto r = scanner_.scan(in_);
      if (r == HeadScanner::Result::error)
        return fail(scanner_.error_status(), scanner_.error_message());
      if (r == HeadScanner::Result::need_more) return read();
      size_t lead = 0;
      while (in_.compare(lead, 2, "\r\n") == 0) lead += 2;
      in_.erase(0, lead);
      parser_.emplace();
      parser_->header_limit(uint32_t(scanner_.head().bytes + 16));
      parser_->body_limit(uint64_t(sh_->cfg.max_body_bytes));
      parser_->eager(true);
      method_ = scanner_.head().method;
      path_ = scanner_.head().target.substr(0, scanner_.head().target.find('?'));
      const std::string* expect = scanner_.head().field("Expect");
      expect_continue_ = expect && iequals(*expect, "100-continue");
      phase_ = Phase::body;
      body_deadline_ = std::chrono::steady_clock::now() + seconds(sh_->cfg.body_timeout_s);
    }
    while (!parser_->is_done() && !in_.empty()) {
      boost::beast::error_code ec;
      size_t used = parser_->put(asio::buffer(in_.data(), in_.size()), ec);
      in_.erase(0, used);
      if (ec == http::error::need_more) break;
      if (ec == http::error::body_limit) {
        return fail(413, "request body exceeds the limit of " +
                             std::to_string(sh_->cfg.max_body_bytes) + " bytes");
      }
      if (ec) return fail(400, "malformed request: " + ec.message());
      if (used == 0) break;
    }
    if (!parser_->is_done()) {
      // Body bytes are consumed as they come: what stays is a chunk-size line or trailer part
      // that has not ended, which must not grow without bound.
      if (in_.size() > sh_->cfg.head.max_head_bytes)
        return fail(400, "chunk header or trailer section too long");
      arm_body_timer();  // each read that made progress moves the stall deadline
      if (expect_continue_ && parser_->is_header_done()) {
        expect_continue_ = false;
        queue_write("HTTP/1.1 100 Continue\r\n\r\n");
      }
      return read();
    }
    dispatch();
  }

  void dispatch() {
    HttpRequest req;
    req.head = scanner_.head();
    req.body = std::move(parser_->get().body());
    req.path = req.head.target.substr(0, req.head.target.find('?'));
    req.peer = peer_;
    keep_alive_ = parser_->keep_alive();
    head_only_ = req.head.method == "HEAD";
    chunked_ = req.head.version == "HTTP/1.1";
    parser_.reset();
    scanner_.reset();
    phase_ = Phase::responding;
    read_timer_.cancel();
    method_ = req.head.method;
    path_ = req.path;
    cors_ = cors_headers(sh_->cfg.allowed_origins, req.head.field("Origin"));
    Routed routed;
    try {
      routed = sh_->handler(req, make_waker());
    } catch (const std::exception& e) {
      routed.reply = {500, "application/json",
                      internal_error(std::string("internal error: ") + e.what()).to_json()};
    }
    if (!routed.pending) return send_reply(routed.reply);
    pending_ = std::move(routed.pending);
    pending_started_ = false;
    pump(false);
    process();  // watch the connection while the response is produced
  }

  // The response begins once the pending reply knows whether it streams (one still being
  // prepared elsewhere may not know yet): a stream's head goes out at once.
  bool pending_start() {
    if (pending_started_) return true;
    if (!pending_->decided()) return false;
    pending_started_ = true;
    if (pending_->streaming()) {
      if (!chunked_) keep_alive_ = false;  // an HTTP/1.0 stream ends with the connection
      queue_write(status_line(200) +
                  "Content-Type: text/event-stream\r\nCache-Control: "
                  "no-cache\r\nX-Accel-Buffering: no\r\n" +
                  cors_ + (chunked_ ? "Transfer-Encoding: chunked\r\n" : "Connection: close\r\n") +
                  "\r\n");
      arm_tick();
    }
    return true;
  }

  Waker make_waker() {
    return [slot = wake_] {
      std::lock_guard<std::mutex> lock(slot->mu);
      if (slot->closed || slot->queued.exchange(true)) return;
      asio::post(slot->executor, [w = slot->conn] {
        if (auto c = w.lock()) c->on_wake();
      });
    };
  }

  void on_wake() {
    wake_->queued = false;
    pump(false);
  }

  void pump(bool tick) {
    if (!pending_ || pending_done_ || closed_) return;
    if (!pending_start()) return;
    std::string out;
    bool done = pending_->poll(tick, &out);
    if (pending_->streaming()) {
      if (!out.empty() && !head_only_) {
        if (chunked_) {
          char size[20];
          std::snprintf(size, sizeof size, "%zx\r\n", out.size());
          out = size + out + "\r\n";
        }
        queue_write(std::move(out));
      }
      if (done) {
        if (chunked_ && !head_only_) queue_write("0\r\n\r\n");
        tick_timer_.cancel();
        log(200);
        finish_response();
      }
    } else if (done) {
      pending_done_ = true;
      send_reply(pending_->reply());
    }
  }

  void send_reply(const HttpReply& r) {
    log(r.status);
    queue_write(reply_text(r, keep_alive_, head_only_, cors_));
    finish_response();
  }

  void finish_response() {
    pending_done_ = true;
    response_done_ = true;
    if (!writing_) after_response();
  }

  // The response is written: the next pipelined request, or the close.
  void after_response() {
    response_done_ = false;
    pending_done_ = false;
    pending_.reset();
    if (!keep_alive_) return graceful_close();
    phase_ = Phase::idle;
    arm_read_timer(sh_->cfg.idle_timeout_s);
    process();
  }

  void fail(int status, const std::string& message) {
    if (pending_) pending_->client_gone();
    pending_.reset();
    failed_ = true;
    keep_alive_ = false;
    head_only_ = false;
    in_.clear();
    in_.shrink_to_fit();
    parser_.reset();
    phase_ = Phase::responding;
    read_timer_.cancel();
    HttpReply r = status == 413 ? HttpReply{413, "application/json",
                                            payload_too_large(sh_->cfg.max_body_bytes).to_json()}
                                : error_reply(status, message);
    log(status, &message);
    queue_write(reply_text(r, false, false));
    finish_response();
    read();  // input is discarded from here on
  }

  void graceful_close() {
    phase_ = Phase::closing;
    error_code ec;
    sock_.shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return close();
    arm_read_timer(std::chrono::duration<double>(kLinger).count());
    read();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    wake_->close();
    if (pending_ && !pending_done_) pending_->client_gone();
    pending_.reset();
    read_timer_.cancel();
    write_timer_.cancel();
    tick_timer_.cancel();
    error_code ec;
    sock_.close(ec);
  }

  void queue_write(std::string s) {
    out_.push_back(std::move(s));
    flush();
  }

  void flush() {
    if (writing_ || out_.empty() || closed_) return;
    while (out_.size() > 1) {  // one write for everything queued
      out_[0] += out_[1];
      out_.erase(out_.begin() + 1);
    }
    writing_ = true;
    write_timer_.expires_after(seconds(sh_->cfg.write_timeout_s));
    write_timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec && self->writing_) self->close();
    });
    asio::async_write(sock_, asio::buffer(out_.front()),
                      [self = shared_from_this()](error_code ec, size_t) { self->on_written(ec); });
  }

  void on_written(error_code ec) {
    writing_ = false;
    write_timer_.cancel();
    if (closed_) return;
    if (ec) return close();
    out_.pop_front();
    if (!out_.empty()) return flush();
    if (response_done_) after_response();
  }

  void arm_read_timer(double s) {
    read_timer_.expires_after(seconds(s));
    read_timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec) self->on_read_timeout();
    });
  }

  void arm_body_timer() {
    read_timer_.expires_at(std::min(
        body_deadline_, std::chrono::steady_clock::now() + seconds(sh_->cfg.body_stall_s)));
    read_timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec) self->on_read_timeout();
    });
  }

  void on_read_timeout() {
    if (closed_) return;
    switch (phase_) {
      case Phase::head:
        return fail(408, "the request head was not received within " +
                             std::to_string(int(sh_->cfg.head_timeout_s)) + " s");
      case Phase::body:
        return fail(408, "the request body stalled for " +
                             std::to_string(int(sh_->cfg.body_stall_s)) + " s or took over " +
                             std::to_string(int(sh_->cfg.body_timeout_s)) + " s");
      case Phase::responding:
        return;
      case Phase::idle:
      case Phase::closing:
        return close();
    }
  }

  void arm_tick() {
    tick_timer_.expires_after(kStreamTick);
    tick_timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (ec || self->closed_ || !self->pending_ || self->pending_done_) return;
      self->pump(true);
      if (self->pending_ && !self->pending_done_) self->arm_tick();
    });
  }

  void log(int status, const std::string* refusal = nullptr) {
    if (sh_->logger) sh_->logger(method_, path_, status, refusal);
  }

  std::shared_ptr<Shared> sh_;
  tcp::socket sock_;
  asio::steady_timer read_timer_, write_timer_, tick_timer_;
  std::array<char, kReadChunk> rbuf_;
  std::string in_;
  std::deque<std::string> out_;
  HeadScanner scanner_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<WakeSlot> wake_;
  std::unique_ptr<PendingReply> pending_;
  std::string method_, path_;  // of the request being read or answered ("" until its head)
  std::string peer_;           // the client's address
  bool peer_counted_ = false;
  std::string cors_;  // the CORS header lines of the current request's response
  std::chrono::steady_clock::time_point body_deadline_;
  Phase phase_ = Phase::idle;
  size_t linger_bytes_ = 0;
  bool reading_ = false, writing_ = false, closed_ = false, failed_ = false;
  bool keep_alive_ = true, head_only_ = false, chunked_ = true, expect_continue_ = false;
  bool pending_done_ = false, response_done_ = false, pending_started_ = false;
};

}  // namespace

struct HttpTransport::Impl {
  std::shared_ptr<Shared> sh = std::make_shared<Shared>();
  std::optional<asio::io_context> io;
  std::optional<tcp::acceptor> acceptor;
  std::optional<asio::steady_timer> retry;
  std::vector<std::thread> threads;
  bool stopped = false;
  int max_connections = 0;  // the configured cap, lowered to fit the descriptor limit
  int max_per_peer = 0;     // client_cap() of it; binds only below max_connections

  void accept() {
    acceptor->async_accept(asio::make_strand(*io), [this](error_code ec, tcp::socket sock) {
      if (ec == asio::error::operation_aborted || !acceptor->is_open()) return;
      if (ec) {  // out of descriptors, most likely: try again shortly rather than spin
        retry->expires_after(std::chrono::milliseconds(50));
        retry->async_wait([this](error_code e) {
          if (!e) accept();
        });
        return;
      }
      error_code pe;
      const tcp::endpoint remote = sock.remote_endpoint(pe);
      std::string peer = pe ? std::string() : remote.address().to_string();
      const bool per_peer = !peer.empty() && max_per_peer < max_connections;
      if (connection_count() >= max_connections) {
        reject(std::move(sock), 503,
               unavailable("the server is at its limit of " + std::to_string(max_connections) +
                           " connections: retry later"));
      } else if (per_peer && !sh->peers.acquire(peer, max_per_peer)) {
        // One address holding most connections (idle sockets, say) leaves the rest to others.
        ++sh->peer_refusals;
        reject(std::move(sock), 429,
               overloaded("this address already holds " + std::to_string(max_per_peer) +
                          " open connections, its limit (--client-max-connections): close idle "
                          "ones or reuse them; other clients are still served"));
      } else {
        std::make_shared<Connection>(sh, std::move(sock), std::move(peer), per_peer)->start();
      }
      accept();
    });
  }

  int connection_count() const {
    std::lock_guard<std::mutex> lock(sh->mu);
    return int(sh->live.size());
  }

  void reject(tcp::socket sock, int status, const ApiError& why) {
    auto s = std::make_shared<tcp::socket>(std::move(sock));
    if (sh->logger) sh->logger("", "", status, &why.message);
    auto text = std::make_shared<std::string>(
        reply_text({status, "application/json", why.to_json()}, false, false));
    asio::async_write(*s, asio::buffer(*text), [s, text](error_code, size_t) {
      error_code ec;
      s->shutdown(tcp::socket::shutdown_send, ec);
      s->close(ec);
    });
  }
};

HttpTransport::HttpTransport(TransportConfig cfg, RequestHandler handler, ResponseLogger logger)
    : impl_(std::make_unique<Impl>()) {
  impl_->sh->cfg = std::move(cfg);
  impl_->sh->handler = std::move(handler);
  impl_->sh->logger = std::move(logger);
  impl_->io.emplace(std::max(1, impl_->sh->cfg.io_threads));
}

HttpTransport::~HttpTransport() {
  stop();
}

int HttpTransport::bind() {
  Impl& m = *impl_;
  const TransportConfig& c = m.sh->cfg;
  std::string where = c.host + ":" + std::to_string(c.port);
  try {
    tcp::resolver resolver(*m.io);
    auto results = resolver.resolve(c.host, std::to_string(c.port), tcp::resolver::passive);
    tcp::endpoint ep = results.begin()->endpoint();
    m.acceptor.emplace(*m.io);
    m.acceptor->open(ep.protocol());
    m.acceptor->set_option(asio::socket_base::reuse_address(true));
    m.acceptor->bind(ep);
    m.acceptor->listen(4096);
    m.retry.emplace(*m.io);
    return m.acceptor->local_endpoint().port();
  } catch (const boost::system::system_error& e) {
    m.acceptor.reset();
    throw Error("cannot listen on " + where + ": " + e.code().message());
  }
}

void HttpTransport::start() {
  Impl& m = *impl_;
  INVAR_CHECK(m.acceptor.has_value(), "bind() before start()");
  // Past the descriptor limit accept() fails and new clients would wait unanswered: the cap
  // stays below it (with room for the model file, logs and the engine), so they get their 503.
  m.max_connections = m.sh->cfg.max_connections;
  rlimit fds{};
  if (getrlimit(RLIMIT_NOFILE, &fds) == 0 && fds.rlim_cur != RLIM_INFINITY)
    m.max_connections = int(
        std::min<rlim_t>(rlim_t(m.max_connections), fds.rlim_cur > 128 ? fds.rlim_cur - 64 : 64));
  m.max_per_peer = int(client_cap(m.sh->cfg.max_connections_per_peer, m.max_connections));
  m.accept();
  for (int i = 0; i < std::max(1, m.sh->cfg.io_threads); ++i)
    m.threads.emplace_back([&m] { m.io->run(); });
}

void HttpTransport::stop() {
  Impl& m = *impl_;
  if (m.stopped) return;
  m.stopped = true;
  m.io->stop();
  for (auto& t : m.threads) t.join();
  m.threads.clear();
  std::vector<std::shared_ptr<Connection>> live;
  {
    std::lock_guard<std::mutex> lock(m.sh->mu);
    for (auto& [p, w] : m.sh->live)
      if (auto c = w.lock()) live.push_back(std::move(c));
  }
  for (auto& c : live) c->detach();
  live.clear();
  m.retry.reset();
  m.acceptor.reset();
  m.io.reset();  // destroys the queued handlers, and with them the connections
}

int HttpTransport::connections() const {
  return impl_->connection_count();
}

uint64_t HttpTransport::peer_refusals() const {
  return impl_->sh->peer_refusals.load();
}

}  // namespace invar::server
