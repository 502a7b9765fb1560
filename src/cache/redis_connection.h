// One connection to a Redis server: TCP, or TLS through OpenSSL, with AUTH and SELECT, every
// step bounded by a deadline. The RESP protocol is hiredis's (commands formatted by
// redisFormatCommandArgv, replies parsed by its redisReader); the socket is this file's, since
// the hiredis Debian ships (0.14) has no TLS.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct redisReply;  // hiredis
struct ssl_ctx_st;  // OpenSSL SSL_CTX
struct ssl_st;      // OpenSSL SSL

namespace invar {

struct RedisUrl {
  bool tls = false;            // rediss://
  std::string user, password;  // AUTH [user] password ("": none)
  std::string host;
  int port = 6379;
  int db = 0;
};
// redis[s]://[[user]:password@]host[:port][/db] (user and password percent-decoded, an IPv6
// host in brackets); throws Error naming what is wrong.
RedisUrl redis_url_parse(const std::string& url);

// A reply that must be freed, whatever path leaves the scope.
struct RedisReplyFree {
  void operator()(redisReply* r) const;
};
using RedisReply = std::unique_ptr<redisReply, RedisReplyFree>;

// What every connection of one tier shares: the TLS context (CAs loaded once).
class RedisTls {
 public:
  // ca_file "": the system's CAs. Throws Error for an unreadable file.
  explicit RedisTls(const std::string& ca_file);
  ~RedisTls();
  RedisTls(const RedisTls&) = delete;
  RedisTls& operator=(const RedisTls&) = delete;
  ssl_ctx_st* ctx() const { return ctx_; }

 private:
  ssl_ctx_st* ctx_ = nullptr;
};

class RedisConnection {
 public:
  RedisConnection() = default;
  ~RedisConnection() { close(); }
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Connects (TLS handshake with the host's certificate checked when url.tls), then AUTH and
  // SELECT as the URL says; false with why on any failure, the connection closed.
  bool open(const RedisUrl& url, const RedisTls* tls, double timeout_s, std::string& why);
  void close();
  bool is_open() const { return fd_ >= 0; }
  // Sends one command and reads its reply, within timeout_s and at most reply_bytes_max bytes
  // of reply (a larger one is not read: the connection is closed). Null with why on failure,
  // the connection then closed (its state is unknown). An error reply is returned as a reply.
  RedisReply command(const std::vector<std::string_view>& argv, std::string& why,
                     int64_t reply_bytes_max = int64_t{1} << 20);

 private:
  bool io_wait(bool write, int64_t deadline_ms, std::string& why);
  bool send_all(const char* p, size_t n, int64_t deadline_ms, std::string& why);
  // Up to n bytes into p: > 0 read, 0 the peer closed, −1 failed (why set).
  long recv_some(char* p, size_t n, int64_t deadline_ms, std::string& why);

  int fd_ = -1;
  ssl_st* ssl_ = nullptr;
  double timeout_s_ = 0.5;
};

}  // namespace invar
