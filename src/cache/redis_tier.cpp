#include "cache/redis_tier.h"

#include <hiredis/hiredis.h>

#include <fstream>

#include "cache/tier_record.h"
#include "core/error.h"

namespace invar {

namespace {

// Why a command failed: the server's error reply, or the connection's error (a null reply).
std::string reply_error(const redisReply* r, const std::string& why) {
  if (r && r->type == REDIS_REPLY_ERROR) return std::string(r->str, r->len);
  if (r) return "unexpected reply type " + std::to_string(r->type);
  return why.empty() ? "no reply" : why;
}

std::string password_read(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line))
    throw Error("--cache-redis-password-file " + path + ": cannot read a line");
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  if (line.empty()) throw Error("--cache-redis-password-file " + path + ": empty password");
  return line;
}

}  // namespace

RedisTier::RedisTier(RedisTierConfig cfg) : cfg_(std::move(cfg)) {
  url_ = redis_url_parse(cfg_.url);
  if (!(cfg_.timeout_s > 0)) throw Error("--cache-tier-timeout must be > 0");
  if (!cfg_.password_file.empty()) {
    if (!url_.password.empty())
      throw Error("--cache-redis-password-file: the URL holds a password already; give it once");
    url_.password = password_read(cfg_.password_file);
  }
  if (!cfg_.ca_file.empty() && !url_.tls)
    throw Error("--cache-redis-ca is for a rediss:// (TLS) URL");
  if (url_.tls) tls_ = std::make_unique<RedisTls>(cfg_.ca_file);
  prefix_ = "invar:" + cfg_.fingerprint + ":";
  std::lock_guard<std::mutex> lock(reader_.mu);
  if (!connected(reader_)) return;
  std::string why;
  RedisReply r = reader_.conn.command({"CONFIG", "GET", "maxmemory*"}, why);
  if (r && r->type == REDIS_REPLY_ARRAY)
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
      const redisReply* k = r->element[i];
      const redisReply* v = r->element[i + 1];
      if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) continue;
      const std::string name(k->str, k->len);
      if (name == "maxmemory" || name == "maxmemory-policy")
        policy_ += (policy_.empty() ? "" : " ") + name + "=" + std::string(v->str, v->len);
    }
  // An ACL user may not be allowed CONFIG: the tier works without knowing the policy.
  if (r && r->type == REDIS_REPLY_ERROR)
    policy_ = "policy not readable: " + reply_error(r.get(), why);
}

RedisTier::~RedisTier() {
  for (Connection* c : {&reader_, &writer_}) {
    std::lock_guard<std::mutex> lock(c->mu);
    c->conn.close();
  }
}

bool RedisTier::connected(Connection& c) {
  if (c.conn.is_open()) return true;
  const auto now = std::chrono::steady_clock::now();
  if (now < c.retry_at) return false;
  c.retry_at = now + std::chrono::seconds(1);
  std::string why;
  if (!c.conn.open(url_, tls_.get(), cfg_.timeout_s, why)) {
    c.error = why;
    return false;
  }
  return true;
}

void RedisTier::drop(Connection& c) {
  c.conn.close();
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
  std::string why;
  RedisReply r;
  if (cfg_.value_bytes_max > 0) {
    // At most one byte more than any record: a larger value is found (and refused as corrupt)
    // without being read, however large it is.
    const std::string last = std::to_string(cfg_.value_bytes_max);
    r = reader_.conn.command({"GETRANGE", k, "0", last}, why, cfg_.value_bytes_max + 64);
  } else {
    r = reader_.conn.command({"GET", k}, why, int64_t{1} << 40);
  }
  if (!r || (r->type != REDIS_REPLY_NIL && r->type != REDIS_REPLY_STRING)) {
    reader_.error = "GET: " + reply_error(r.get(), why);
    failure_note(false, reader_.error);
    return TierGet::failed;
  }
  // GETRANGE answers "" for a missing key; no record is empty.
  if (r->type == REDIS_REPLY_NIL || r->len == 0) return TierGet::missing;
  out.assign(r->str, r->str + r->len);
  return TierGet::found;
}

TierPut RedisTier::put(uint64_t key, std::span<const char> record) {
  std::lock_guard<std::mutex> lock(writer_.mu);
  if (!connected(writer_)) {
    failure_note(true, "not connected: " + writer_.error);
    return TierPut::failed;
  }
  const std::string k = key_of(key);
  std::string why;
  // NX: a record already there holds the same block; leave it (and its recency) alone.
  RedisReply r =
      writer_.conn.command({"SET", k, std::string_view(record.data(), record.size()), "NX"}, why);
  if (!r || r->type == REDIS_REPLY_ERROR) {
    writer_.error = "SET: " + reply_error(r.get(), why);
    failure_note(true, writer_.error);
    return TierPut::failed;
  }
  return r->type == REDIS_REPLY_NIL ? TierPut::present : TierPut::written;
}

void RedisTier::remove(uint64_t key) {
  std::lock_guard<std::mutex> lock(reader_.mu);
  if (!connected(reader_)) return;
  const std::string k = key_of(key);
  std::string why;
  reader_.conn.command({"DEL", k}, why);
}

std::string RedisTier::describe() const {
  const std::string who =
      url_.password.empty() ? "" : (url_.user.empty() ? "default" : url_.user) + "@";
  return std::string(url_.tls ? "rediss " : "redis ") + who + url_.host + ":" +
         std::to_string(url_.port) + "/" + std::to_string(url_.db) + " keys " + prefix_ + "* (" +
         (policy_.empty() ? "not reachable yet" : policy_) + ")";
}

}  // namespace invar
