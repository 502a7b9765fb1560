// File-identity-keyed SHA-256 cache entries (format: sha256_cache.h).
#include "model/sha256_cache.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/user_cache_dir.h"

namespace invar {

namespace {

constexpr const char* kMagic = "invar-sha256-cache 1";

std::string entry_path(const std::string& dir, const FileIdentity& id) {
  return dir + "/" + std::to_string(id.dev) + "-" + std::to_string(id.ino) + ".sha256";
}

std::string identity_line(const FileIdentity& id) {
  return std::to_string(id.dev) + " " + std::to_string(id.ino) + " " + std::to_string(id.size) +
         " " + std::to_string(id.mtime_ns) + " " + std::to_string(id.ctime_ns);
}

bool is_sha256_hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char ch : s)
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
  return true;
}

}  // namespace

int64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::string sha256_cache_dir_default() {
  const std::string dir = user_cache_dir();
  return dir.empty() ? "" : dir + "/sha256";
}

std::optional<std::string> sha256_cache_find(const std::string& dir, const FileIdentity& id) {
  std::ifstream in(entry_path(dir, id));
  std::string magic, ident, hex, rest;
  if (!in || !std::getline(in, magic) || !std::getline(in, ident) || !std::getline(in, hex))
    return std::nullopt;
  if (magic != kMagic || ident != identity_line(id) || !is_sha256_hex(hex)) return std::nullopt;
  if (std::getline(in, rest)) return std::nullopt;  // trailing lines: not an entry we wrote
  return hex;
}

std::string sha256_cache_store(const std::string& dir, const FileIdentity& id,
                               const std::string& hex, int64_t hash_start_ns) {
  if (!is_sha256_hex(hex)) return "not a SHA-256";
  if (id.ctime_ns > hash_start_ns - kSha256CacheSettleNs)
    return "the file changed less than " + std::to_string(kSha256CacheSettleNs / 1000000000) +
           " s before it was hashed";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return "cannot create " + dir + ": " + ec.message();
  const std::string path = entry_path(dir, id);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kMagic << "\n" << identity_line(id) << "\n" << hex << "\n";
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      return "cannot write " + tmp;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return "cannot rename " + tmp + ": " + std::strerror(err);
  }
  return "";
}

}  // namespace invar
