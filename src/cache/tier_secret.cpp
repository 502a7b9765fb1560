#include "cache/tier_secret.h"

#include <fcntl.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cache/tier_config.h"
#include "core/error.h"

namespace invar {

namespace {

constexpr size_t kMasterMin = 32;  // bytes: a 256-bit secret at the least

SecretKey hmac_sha256(std::span<const unsigned char> key, std::string_view label,
                      std::span<const unsigned char> bytes) {
  std::string msg(label);
  msg.push_back('\0');  // a label never runs into the bytes it labels
  msg.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  SecretKey out{};
  unsigned int len = 0;
  const unsigned char* r =
      HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), out.data(), &len);
  INVAR_CHECK(r != nullptr && len == out.size());
  return out;
}

std::string hex_of(std::span<const unsigned char> bytes) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (const unsigned char b : bytes) {
    s.push_back(digits[b >> 4]);
    s.push_back(digits[b & 15]);
  }
  return s;
}

std::string errno_text() {
  return std::strerror(errno);
}

// The file's bytes, at most 4 KiB (a key file is small; anything else is a mistake).
std::vector<unsigned char> key_file_read(const std::string& path, const char* flag) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw Error(std::string(flag) + " " + path + ": " + errno_text());
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > 4096) {
    ::close(fd);
    throw Error(std::string(flag) + " " + path + ": not a regular file of at most 4096 bytes");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    ::close(fd);
    throw Error(std::string(flag) + " " + path +
                ": writable by group or others; whoever can change the key can forge cache "
                "records (chmod go-w)");
  }
  std::vector<unsigned char> bytes(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  bytes.resize(got);
  while (!bytes.empty() && (bytes.back() == '\n' || bytes.back() == '\r')) bytes.pop_back();
  return bytes;
}

}  // namespace

uint64_t keyed_hash64(const SecretKey& key, std::string_view label,
                      std::span<const unsigned char> bytes) {
  const SecretKey h = hmac_sha256(key, label, bytes);
  uint64_t v;
  std::memcpy(&v, h.data(), sizeof v);
  return v;
}

TierSecret tier_secret_derive(std::span<const unsigned char> master, std::string origin) {
  INVAR_CHECK(master.size() >= kMasterMin);
  TierSecret s;
  s.chain = hmac_sha256(master, "invar chain key v1", {});
  s.name = hmac_sha256(master, "invar record name v1", {});
  s.seal = hmac_sha256(master, "invar record seal v1", {});
  const SecretKey id = hmac_sha256(master, "invar key id v1", {});
  s.id = hex_of(std::span(id).first(8));
  s.origin = std::move(origin);
  return s;
}

TierSecret tier_secret_load(const std::string& path) {
  const auto bytes = key_file_read(path, "--cache-tier-key");
  if (bytes.size() < kMasterMin)
    throw Error("--cache-tier-key " + path + ": " + std::to_string(bytes.size()) +
                " bytes; a key needs at least " + std::to_string(kMasterMin) +
                " (e.g. `openssl rand -hex 32 > " + path + "`)");
  return tier_secret_derive(bytes, path);
}

TierSecret tier_secret_random() {
  std::array<unsigned char, kMasterMin> master{};
  INVAR_CHECK(RAND_bytes(master.data(), static_cast<int>(master.size())) == 1);
  return tier_secret_derive(master, "this process (no tier)");
}

TierSecret tier_secret_for_dir(const std::string& cache_dir) {
  const std::string path = cache_dir + "/tier.key";
  if (::access(path.c_str(), F_OK) != 0) {
    // Written whole under a temporary name, then linked to its name: a process that races this
    // one reads either no file or the whole key, and link() refuses to replace a winner's key.
    std::error_code ec;
    std::filesystem::create_directories(cache_dir, ec);
    if (ec) throw Error("--cache-dir " + cache_dir + ": " + ec.message());
    std::array<unsigned char, kMasterMin> master{};
    INVAR_CHECK(RAND_bytes(master.data(), static_cast<int>(master.size())) == 1);
    const std::string text = hex_of(master) + "\n";
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
      throw Error("--cache-dir " + cache_dir + ": cannot create tier.key: " + errno_text());
    const bool written =
        ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
        ::fsync(fd) == 0;
    ::close(fd);
    if (!written) {
      ::unlink(tmp.c_str());
      throw Error("--cache-dir " + cache_dir + ": cannot write tier.key: " + errno_text());
    }
    const bool linked = ::link(tmp.c_str(), path.c_str()) == 0;
    const int link_errno = errno;
    ::unlink(tmp.c_str());
    if (!linked && link_errno != EEXIST)
      throw Error("--cache-dir " + cache_dir +
                  ": cannot create tier.key: " + std::strerror(link_errno));
  }
  const auto bytes = key_file_read(path, "--cache-dir key");
  if (bytes.size() < kMasterMin)
    throw Error("--cache-dir " + path + ": shorter than " + std::to_string(kMasterMin) +
                " bytes; remove it to have a new key made (the cached records are then unused)");
  return tier_secret_derive(bytes, path);
}

TierSecret tier_secret_resolve(const TierConfig& cfg) {
  if (!cfg.key_file.empty()) return tier_secret_load(cfg.key_file);
  if (!cfg.redis_url.empty())
    throw Error(
        "--cache-redis needs --cache-tier-key FILE: records shared with other machines are "
        "sealed with a key every replica holds (e.g. `openssl rand -hex 32 > tier.key`, "
        "docs/security.md)");
  if (!cfg.cache_dir.empty()) return tier_secret_for_dir(cfg.cache_dir);
  return tier_secret_random();
}

}  // namespace invar
