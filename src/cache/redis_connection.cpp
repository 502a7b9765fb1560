#include "cache/redis_connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>

#include "core/error.h"

namespace invar {

namespace {

constexpr const char* kUrlForm = "expected redis[s]://[[user]:password@]host[:port][/db]";

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The URL as it may be logged: the password replaced.
std::string url_shown(const std::string& url) {
  const auto scheme_end = url.find("://");
  const auto at = url.rfind('@');
  if (scheme_end == std::string::npos || at == std::string::npos || at < scheme_end) return url;
  const auto colon = url.find(':', scheme_end + 3);
  if (colon == std::string::npos || colon > at) return url;
  return url.substr(0, colon + 1) + "***" + url.substr(at);
}

int number_parse(const std::string& s, const std::string& url, const char* what, int lo, int hi) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos)
    throw Error("--cache-redis " + url_shown(url) + ": " + what + " must be a number");
  const int v = std::stoi(s);
  if (v < lo || v > hi)
    throw Error("--cache-redis " + url_shown(url) + ": " + what + " out of range " +
                std::to_string(lo) + ".." + std::to_string(hi));
  return v;
}

std::string percent_decode(const std::string& s, const std::string& url) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    auto hex = [](char c) {
      return c >= '0' && c <= '9'   ? c - '0'
             : c >= 'a' && c <= 'f' ? c - 'a' + 10
             : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                    : -1;
    };
    const int hi = i + 2 < s.size() ? hex(s[i + 1]) : -1,
              lo = i + 2 < s.size() ? hex(s[i + 2]) : -1;
    if (hi < 0 || lo < 0) throw Error("--cache-redis " + url_shown(url) + ": a bad %-escape");
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

std::string ssl_error_text() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return std::strerror(errno);
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return buf;
}

bool is_ip_literal(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

void RedisReplyFree::operator()(redisReply* r) const {
  if (r) freeReplyObject(r);
}

RedisUrl redis_url_parse(const std::string& url) {
  RedisUrl u;
  std::string rest;
  if (url.rfind("redis://", 0) == 0) {
    rest = url.substr(8);
  } else if (url.rfind("rediss://", 0) == 0) {
    rest = url.substr(9);
    u.tls = true;
  } else {
    throw Error("--cache-redis " + url_shown(url) + ": " + kUrlForm);
  }
  if (const auto slash = rest.find('/'); slash != std::string::npos) {
    u.db = number_parse(rest.substr(slash + 1), url, "database", 0, 1 << 20);
    rest.resize(slash);
  }
  if (const auto at = rest.rfind('@'); at != std::string::npos) {
    const std::string userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const auto colon = userinfo.find(':');
    if (colon == std::string::npos || colon + 1 == userinfo.size())
      throw Error("--cache-redis " + url_shown(url) +
                  ": the part before '@' must be [user]:password");
    u.user = percent_decode(userinfo.substr(0, colon), url);
    u.password = percent_decode(userinfo.substr(colon + 1), url);
  }
  if (!rest.empty() && rest[0] == '[') {  // [IPv6]:port
    const auto close = rest.find(']');
    if (close == std::string::npos)
      throw Error("--cache-redis " + url_shown(url) + ": " + kUrlForm);
    u.host = rest.substr(1, close - 1);
    const std::string after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') throw Error("--cache-redis " + url_shown(url) + ": " + kUrlForm);
      u.port = number_parse(after.substr(1), url, "port", 1, 65535);
    }
  } else {
    if (const auto colon = rest.rfind(':'); colon != std::string::npos) {
      u.port = number_parse(rest.substr(colon + 1), url, "port", 1, 65535);
      rest.resize(colon);
    }
    u.host = rest;
  }
  if (u.host.empty() || u.host.find_first_of("@/ ") != std::string::npos)
    throw Error("--cache-redis " + url_shown(url) + ": " + kUrlForm);
  return u;
}

RedisTls::RedisTls(const std::string& ca_file) {
  ctx_ = SSL_CTX_new(TLS_client_method());
  INVAR_CHECK(ctx_ != nullptr);
  SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
  const bool loaded = ca_file.empty()
                          ? SSL_CTX_set_default_verify_paths(ctx_) == 1
                          : SSL_CTX_load_verify_locations(ctx_, ca_file.c_str(), nullptr) == 1;
  if (!loaded) {
    const std::string why = ssl_error_text();
    SSL_CTX_free(ctx_);
    ctx_ = nullptr;
    throw Error("--cache-redis-ca " + (ca_file.empty() ? std::string("(system)") : ca_file) +
                ": cannot load certificates: " + why);
  }
  // A TLS write to a peer that has gone raises SIGPIPE (OpenSSL writes with write(2)); a
  // process that has not chosen a handler must not die of it.
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL)
    std::signal(SIGPIPE, SIG_IGN);
}

RedisTls::~RedisTls() {
  if (ctx_) SSL_CTX_free(ctx_);
}

void RedisConnection::close() {
  if (ssl_) SSL_free(ssl_);
  ssl_ = nullptr;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool RedisConnection::io_wait(bool write, int64_t deadline_ms, std::string& why) {
  for (;;) {
    const int64_t left = deadline_ms - now_ms();
    if (left <= 0) {
      why = "timed out";
      return false;
    }
    pollfd p{fd_, static_cast<short>(write ? POLLOUT : POLLIN), 0};
    const int n = ::poll(&p, 1, static_cast<int>(left));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) {
      why = std::strerror(errno);
      return false;
    }
  }
}

bool RedisConnection::open(const RedisUrl& url, const RedisTls* tls, double timeout_s,
                           std::string& why) {
  close();
  timeout_s_ = timeout_s;
  const int64_t deadline = now_ms() + static_cast<int64_t>(timeout_s * 1000);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(url.port);
  if (const int rc = ::getaddrinfo(url.host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    why = "connect: " + url.host + ": " + gai_strerror(rc);
    return false;
  }
  why = "connect: no address";
  for (addrinfo* a = res; a && fd_ < 0; a = a->ai_next) {
    fd_ = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd_ < 0) continue;
    int err = 0;
    socklen_t len = sizeof err;
    if (::connect(fd_, a->ai_addr, a->ai_addrlen) != 0 &&
        (errno != EINPROGRESS || !io_wait(true, deadline, why) ||
         ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)) {
      if (err != 0) why = std::strerror(err);
      why = "connect: " + why;
      ::close(fd_);
      fd_ = -1;
    }
  }
  ::freeaddrinfo(res);
  if (fd_ < 0) return false;
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (url.tls) {
    INVAR_CHECK(tls != nullptr);
    ssl_ = SSL_new(tls->ctx());
    INVAR_CHECK(ssl_ != nullptr);
    SSL_set_fd(ssl_, fd_);
    // The certificate must name the host we asked for (or its address), as a browser checks.
    if (is_ip_literal(url.host)) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), url.host.c_str());
    } else {
      SSL_set_tlsext_host_name(ssl_, url.host.c_str());
      SSL_set1_host(ssl_, url.host.c_str());
    }
    for (;;) {
      ERR_clear_error();
      const int rc = SSL_connect(ssl_);
      if (rc == 1) break;
      const int e = SSL_get_error(ssl_, rc);
      if ((e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) &&
          io_wait(e == SSL_ERROR_WANT_WRITE, deadline, why))
        continue;
      if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
        const long v = SSL_get_verify_result(ssl_);
        why = v != X509_V_OK ? std::string("certificate: ") + X509_verify_cert_error_string(v)
                             : ssl_error_text();
      }
      why = "TLS handshake: " + why;
      close();
      return false;
    }
  }
  if (!url.password.empty()) {
    std::vector<std::string_view> argv = {"AUTH"};
    if (!url.user.empty()) argv.push_back(url.user);
    argv.push_back(url.password);
    RedisReply r = command(argv, why);
    if (!r || r->type == REDIS_REPLY_ERROR) {
      why = "AUTH: " + (r ? std::string(r->str, r->len) : why);
      close();
      return false;
    }
  }
  if (url.db != 0) {
    const std::string db = std::to_string(url.db);
    RedisReply r = command({"SELECT", db}, why);
    if (!r || r->type == REDIS_REPLY_ERROR) {
      why = "SELECT " + db + ": " + (r ? std::string(r->str, r->len) : why);
      close();
      return false;
    }
  }
  return true;
}

bool RedisConnection::send_all(const char* p, size_t n, int64_t deadline_ms, std::string& why) {
  while (n > 0) {
    if (ssl_) {
      ERR_clear_error();
      const int w = SSL_write(ssl_, p, static_cast<int>(std::min<size_t>(n, 1 << 30)));
      if (w > 0) {
        p += w;
        n -= static_cast<size_t>(w);
        continue;
      }
      const int e = SSL_get_error(ssl_, w);
      if ((e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) &&
          io_wait(e == SSL_ERROR_WANT_WRITE, deadline_ms, why))
        continue;
      if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) why = ssl_error_text();
      return false;
    }
    const ssize_t w = ::send(fd_, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
    } else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!io_wait(true, deadline_ms, why)) return false;
    } else {
      why = std::strerror(errno);
      return false;
    }
  }
  return true;
}

long RedisConnection::recv_some(char* p, size_t n, int64_t deadline_ms, std::string& why) {
  for (;;) {
    if (ssl_) {
      ERR_clear_error();
      const int r = SSL_read(ssl_, p, static_cast<int>(std::min<size_t>(n, 1 << 30)));
      if (r > 0) return r;
      const int e = SSL_get_error(ssl_, r);
      if (e == SSL_ERROR_ZERO_RETURN) return 0;
      if ((e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) &&
          io_wait(e == SSL_ERROR_WANT_WRITE, deadline_ms, why))
        continue;
      if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) why = ssl_error_text();
      return -1;
    }
    const ssize_t r = ::recv(fd_, p, n, 0);
    if (r >= 0) return static_cast<long>(r);
    if (errno != EAGAIN && errno != EINTR) {
      why = std::strerror(errno);
      return -1;
    }
    if (!io_wait(false, deadline_ms, why)) return -1;
  }
}

RedisReply RedisConnection::command(const std::vector<std::string_view>& argv, std::string& why,
                                    int64_t reply_bytes_max) {
  if (fd_ < 0) {
    why = "not connected";
    return nullptr;
  }
  const int64_t deadline = now_ms() + static_cast<int64_t>(timeout_s_ * 1000);
  std::vector<const char*> args;
  std::vector<size_t> lens;
  for (const auto a : argv) {
    args.push_back(a.data());
    lens.push_back(a.size());
  }
  char* cmd = nullptr;
  const int len =
      redisFormatCommandArgv(&cmd, static_cast<int>(args.size()), args.data(), lens.data());
  INVAR_CHECK(len > 0 && cmd != nullptr);
  const bool sent = send_all(cmd, static_cast<size_t>(len), deadline, why);
  redisFreeCommand(cmd);
  if (!sent) {
    close();
    return nullptr;
  }
  std::unique_ptr<redisReader, void (*)(redisReader*)> reader(redisReaderCreate(), redisReaderFree);
  INVAR_CHECK(reader != nullptr);
  char buf[64 << 10];
  int64_t got = 0;
  for (;;) {
    void* reply = nullptr;
    if (redisReaderGetReply(reader.get(), &reply) != REDIS_OK) {
      why = std::string("protocol error: ") + reader->errstr;
      close();
      return nullptr;
    }
    if (reply) return RedisReply(static_cast<redisReply*>(reply));
    if (got > reply_bytes_max) {
      // A value no record can be (a planted one, or not ours): not read further, and the
      // connection, which still carries the rest of it, is dropped.
      why = "reply longer than " + std::to_string(reply_bytes_max) + " bytes";
      close();
      return nullptr;
    }
    const long n = recv_some(buf, sizeof buf, deadline, why);
    if (n <= 0) {
      if (n == 0) why = "connection closed by the server";
      close();
      return nullptr;
    }
    got += n;
    redisReaderFeed(reader.get(), buf, static_cast<size_t>(n));
  }
}

}  // namespace invar
