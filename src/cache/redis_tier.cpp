#include "cache/redis_tier.h"

#include <hiredis/hiredis.h>

#include <cstring>

#include "cache/tier_record.h"
#include "core/error.h"

namespace invar {

namespace {

timeval timeval_of(double s) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(s);
  tv.tv_usec = static_cast<suseconds_t>((s - static_cast<double>(tv.tv_sec)) * 1e6);
  return tv;
}

int number_parse(const std::string& s, const std::string& url, const char* what, int lo, int hi) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos)
    throw Error("--cache-redis " + url + ": " + what + " must be a number");
  const int v = std::stoi(s);
  if (v < lo || v > hi)
    throw Error("--cache-redis " + url + ": " + what + " out of range " + std::to_string(lo) +
                ".." + std::to_string(hi));
  return v;
}

// A reply that must be freed, whatever path leaves the scope.
struct Reply {
  redisReply* r;
  explicit Reply(void* p) : r(static_cast<redisReply*>(p)) {}
  ~Reply() {
    if (r) freeReplyObject(r);
  }
  Reply(const Reply&) = delete;
  Reply& operator=(const Reply&) = delete;
};

// Why a command failed: the server's error reply, or the connection's error (a null reply).
std::string reply_error(const redisContext* ctx, const redisReply* r) {
  if (r && r->type == REDIS_REPLY_ERROR) return std::string(r->str, r->len);
  if (r) return "unexpected reply type " + std::to_string(r->type);
  return ctx && ctx->err ? ctx->errstr : "no reply";
}

}  // namespace

RedisUrl redis_url_parse(const std::string& url) {
  const std::string scheme = "redis://";
  if (url.rfind(scheme, 0) != 0)
    throw Error("--cache-redis " + url + ": expected redis://host[:port][/db]");
  std::string rest = url.substr(scheme.size());
  RedisUrl u;
  if (const auto slash = rest.find('/'); slash != std::string::npos) {
    u.db = number_parse(rest.substr(slash + 1), url, "database", 0, 1 << 20);
    rest.resize(slash);
  }
  if (const auto colon = rest.rfind(':'); colon != std::string::npos) {
    u.port = number_parse(rest.substr(colon + 1), url, "port", 1, 65535);
    rest.resize(colon);
  }
  if (rest.empty() || rest.find('@') != std::string::npos)
    throw Error("--cache-redis " + url + ": expected redis://host[:port][/db]");
  u.host = rest;
  return u;
}

RedisTier::RedisTier(RedisTierConfig cfg) : cfg_(std::move(cfg)) {
  url_ = redis_url_parse(cfg_.url);
  if (!(cfg_.timeout_s > 0)) throw Error("--cache-tier-timeout must be > 0");
  prefix_ = "invar:" + cfg_.fingerprint + ":";
  std::lock_guard<std::mutex> lock(reader_.mu);
  if (!connected(reader_)) return;
  Reply r(redisCommand(reader_.ctx, "CONFIG GET maxmemory*"));
  if (!r.r) drop(reader_);
  if (r.r && r.r->type == REDIS_REPLY_ARRAY)
    for (size_t i = 0; i + 1 < r.r->elements; i += 2) {
      const redisReply* k = r.r->element[i];
      const redisReply* v = r.r->element[i + 1];
      if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) continue;
      const std::string name(k->str, k->len);
      if (name == "maxmemory" || name == "maxmemory-policy")
        policy_ += (policy_.empty() ? "" : " ") + name + "=" + std::string(v->str, v->len);
    }
}

RedisTier::~RedisTier() {
  for (Connection* c : {&reader_, &writer_}) {
    std::lock_guard<std::mutex> lock(c->mu);
    drop(*c);
  }
}

bool RedisTier::connected(Connection& c) {
  if (c.ctx) return true;
  const auto now = std::chrono::steady_clock::now();
  if (now < c.retry_at) return false;
  c.retry_at = now + std::chrono::seconds(1);
  c.ctx = redisConnectWithTimeout(url_.host.c_str(), url_.port, timeval_of(cfg_.timeout_s));
  if (!c.ctx || c.ctx->err || redisSetTimeout(c.ctx, timeval_of(cfg_.timeout_s)) != REDIS_OK) {
    c.error = "connect: " + std::string(c.ctx && c.ctx->err ? c.ctx->errstr : "failed");
    drop(c);
    return false;
  }
  if (url_.db != 0) {
    Reply r(redisCommand(c.ctx, "SELECT %d", url_.db));
    if (!r.r || r.r->type == REDIS_REPLY_ERROR) {
      c.error = "SELECT " + std::to_string(url_.db) + ": " + reply_error(c.ctx, r.r);
      drop(c);
      return false;
    }
  }
  return true;
}

void RedisTier::drop(Connection& c) {
  if (c.ctx) redisFree(c.ctx);
  c.ctx = nullptr;
}

std::string RedisTier::key_of(uint64_t key) const {
  return prefix_ + tier_key_hex(key);
}

TierGet RedisTier::get(uint64_t key, std::vector<char>& out) {
  std::lock_guard<std::mutex> lock(reader_.mu);
  if (!connected(reader_)) {
    failure_note(false, "not connected: " + reader_.error);
    return TierGet::failed;
  }
  const std::string k = key_of(key);
  Reply r(redisCommand(reader_.ctx, "GET %b", k.data(), k.size()));
  if (!r.r || (r.r->type != REDIS_REPLY_NIL && r.r->type != REDIS_REPLY_STRING)) {
    reader_.error = "GET: " + reply_error(reader_.ctx, r.r);
    failure_note(false, reader_.error);
    if (!r.r) drop(reader_);  // timeout or a broken connection: the context is unusable
    return TierGet::failed;
  }
  if (r.r->type == REDIS_REPLY_NIL) return TierGet::missing;
  out.assign(r.r->str, r.r->str + r.r->len);
  return TierGet::found;
}

TierPut RedisTier::put(uint64_t key, std::span<const char> record) {
  std::lock_guard<std::mutex> lock(writer_.mu);
  if (!connected(writer_)) {
    failure_note(true, "not connected: " + writer_.error);
    return TierPut::failed;
  }
  const std::string k = key_of(key);
  // NX: a record already there holds the same bytes; leave it (and its recency) alone.
  Reply r(
      redisCommand(writer_.ctx, "SET %b %b NX", k.data(), k.size(), record.data(), record.size()));
  if (!r.r || r.r->type == REDIS_REPLY_ERROR) {
    writer_.error = "SET: " + reply_error(writer_.ctx, r.r);
    failure_note(true, writer_.error);
    if (!r.r) drop(writer_);
    return TierPut::failed;
  }
  return r.r->type == REDIS_REPLY_NIL ? TierPut::present : TierPut::written;
}

void RedisTier::remove(uint64_t key) {
  std::lock_guard<std::mutex> lock(reader_.mu);
  if (!connected(reader_)) return;
  const std::string k = key_of(key);
  Reply r(redisCommand(reader_.ctx, "DEL %b", k.data(), k.size()));
  if (!r.r) drop(reader_);
}

std::string RedisTier::describe() const {
  return "redis " + url_.host + ":" + std::to_string(url_.port) + "/" + std::to_string(url_.db) +
         " keys " + prefix_ + "* (" + (policy_.empty() ? "not reachable yet" : policy_) + ")";
}

}  // namespace invar
