#include "cache/disk_tier.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "cache/tier_record.h"
#include "core/error.h"

namespace invar {

namespace fs = std::filesystem;

namespace {

// Fingerprints become directory names: anything but [A-Za-z0-9_-] turns into '_'.
std::string path_safe(const std::string& s) {
  std::string out = s.empty() ? "_" : s;
  for (char& c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') c = '_';
  return out;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "host";
  return path_safe(buf);
}

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w == 0) errno = ENOSPC;  // a short write: the disk is full
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// The rename is durable only once the directory entry is on disk; fsync's result.
int dir_sync(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  const int rc = ::fsync(fd);
  ::close(fd);
  return rc;
}

// Bytes of the regular files under dir, as a filesystem of their own would hold them.
int64_t files_bytes(const std::string& dir) {
  int64_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    std::error_code ec2;
    if (e.is_regular_file(ec2)) n += static_cast<int64_t>(e.file_size(ec2));
  }
  return n;
}

bool key_parse(const std::string& stem, uint64_t& key) {
  if (stem.size() != 16) return false;
  key = 0;
  for (char c : stem) {
    int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (v < 0) return false;
    key = key << 4 | static_cast<uint64_t>(v);
  }
  return true;
}

// A temporary file is stale when its writer is gone: a dead process on this host, or (another
// host on a shared filesystem, whose processes cannot be asked) an hour without change.
bool temporary_stale(const std::string& name, const std::string& host, fs::file_time_type mtime) {
  // <key>.<host>.<pid>.<serial>.tmp
  const auto first = name.find('.');
  const auto last = name.rfind(".tmp");
  if (first != std::string::npos && last != std::string::npos && last > first) {
    const std::string mid = name.substr(first + 1, last - first - 1);
    const auto serial = mid.rfind('.');
    const auto pid_dot =
        serial == std::string::npos ? std::string::npos : mid.rfind('.', serial - 1);
    if (pid_dot != std::string::npos && mid.substr(0, pid_dot) == host) {
      const pid_t pid = static_cast<pid_t>(std::atol(mid.c_str() + pid_dot + 1));
      if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) return true;
    }
  }
  return fs::file_time_type::clock::now() - mtime > std::chrono::hours(1);
}

}  // namespace

DiskTier::DiskTier(DiskTierConfig cfg, DiskTierLimits limits)
    : cfg_(std::move(cfg)), lim_(std::move(limits)) {
  if (cfg_.dir.empty()) throw Error("--cache-dir: empty path");
  if (cfg_.budget_bytes < 0) throw Error("--cache-dir-bytes must be ≥ 0");
  root_ = cfg_.dir + "/" + path_safe(cfg_.fingerprint);
  std::error_code ec;
  fs::create_directories(root_ + "/tmp", ec);
  if (ec) throw Error("--cache-dir " + cfg_.dir + ": cannot create " + root_ + ": " + ec.message());
  if (::access(root_.c_str(), R_OK | W_OK | X_OK) != 0)
    throw Error("--cache-dir " + cfg_.dir + ": " + root_ + " is not writable");
  tmp_prefix_ = host_name() + "." + std::to_string(::getpid());
  scan();
}

std::string DiskTier::path_of(uint64_t key) const {
  const std::string hex = tier_key_hex(key);
  return root_ + "/" + hex.substr(0, 2) + "/" + hex + ".blk";
}

void DiskTier::scan() {
  std::error_code ec;
  const std::string host = host_name();
  for (const auto& e : fs::directory_iterator(root_ + "/tmp", ec)) {
    std::error_code ec2;
    const auto mtime = e.last_write_time(ec2);
    if (!ec2 && temporary_stale(e.path().filename().string(), host, mtime) &&
        fs::remove(e.path(), ec2))
      ++stale_removed_;
  }
  struct Found {
    fs::file_time_type mtime;
    uint64_t key;
    int64_t bytes;
  };
  std::vector<Found> found;
  for (const auto& sub : fs::directory_iterator(root_, ec)) {
    if (!sub.is_directory() || sub.path().filename() == "tmp") continue;
    std::error_code ec2;
    for (const auto& e : fs::directory_iterator(sub.path(), ec2)) {
      uint64_t key = 0;
      if (e.path().extension() != ".blk" || !key_parse(e.path().stem().string(), key)) continue;
      // lstat: a link or a FIFO at a record's name is what it is, not what it points at.
      struct stat st {};
      if (::lstat(e.path().c_str(), &st) != 0) continue;
      if (!file_plausible(st)) {
        if (::unlink(e.path().c_str()) == 0) ++counters.corrupt;
        continue;
      }
      std::error_code ec3;
      const auto mtime = e.last_write_time(ec3);
      if (!ec3) found.push_back({mtime, key, static_cast<int64_t>(st.st_size)});
    }
  }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    return a.mtime != b.mtime ? a.mtime < b.mtime : a.key < b.key;
  });
  std::lock_guard<std::mutex> lock(mu_);
  for (const Found& f : found) known_add(f.key, f.bytes);
  budget_keep();
}

void DiskTier::known_add(uint64_t key, int64_t bytes) {
  if (auto it = known_.find(key); it != known_.end()) {
    lru_.splice(lru_.end(), lru_, it->second.lru);
    return;
  }
  lru_.push_back(key);
  known_[key] = Known{bytes, std::prev(lru_.end())};
  bytes_ += bytes;
}

void DiskTier::budget_keep() {
  while (bytes_ > cfg_.budget_bytes && !lru_.empty()) {
    const uint64_t key = lru_.front();
    lru_.pop_front();
    bytes_ -= known_[key].bytes;
    known_.erase(key);
    ::unlink(path_of(key).c_str());
    ++counters.evictions;
  }
}

bool DiskTier::file_plausible(const struct stat& st) const {
  if (!S_ISREG(st.st_mode)) return false;
  const TierShape& shape = lim_.shape;
  if (shape.block_size <= 0) return true;
  const auto size = static_cast<int64_t>(st.st_size);
  return size >= tier_record_bytes(shape, false) && size <= tier_record_bytes_max(shape);
}

bool DiskTier::space_make(int64_t need) {
  std::lock_guard<std::mutex> lock(mu_);
  if (lru_.empty()) return false;
  const int64_t target = std::max(need, bytes_ / 8);
  int64_t freed = 0;
  while (freed < target && !lru_.empty()) {
    const uint64_t key = lru_.front();
    lru_.pop_front();
    freed += known_[key].bytes;
    bytes_ -= known_[key].bytes;
    known_.erase(key);
    ::unlink(path_of(key).c_str());
    ++counters.evictions;
  }
  ++space_evictions_;
  return true;
}

TierGet DiskTier::get(uint64_t key, std::vector<char>& out) {
  const std::string path = path_of(key);
  // Not a link (ELOOP), and a FIFO must not block the reader (O_NONBLOCK): whoever can write the
  // directory decides what sits at the name, and only the checks below decide what is read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0 && errno == ELOOP) {
    out.clear();  // refused: the reader counts it corrupt and removes the link
    return TierGet::found;
  }
  if (fd < 0) {
    if (errno != ENOENT) {
      failure_note(false, "open " + path + ": " + std::strerror(errno));
      return TierGet::failed;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = known_.find(key); it != known_.end()) {  // removed by another process
      bytes_ -= it->second.bytes;
      lru_.erase(it->second.lru);
      known_.erase(it);
    }
    return TierGet::missing;
  }
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0;
  if (ok && !file_plausible(st)) {
    // A FIFO, a device, a directory, or a size no record of this shape has (a sparse file of
    // gigabytes): nothing is read, the reader counts it corrupt and removes it.
    ::close(fd);
    out.clear();
    return TierGet::found;
  }
  if (ok) {
    out.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < out.size()) {
      const ssize_t r = ::read(fd, out.data() + got, out.size() - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    out.resize(got);  // a short read shows as a truncated record
  }
  if (!ok) failure_note(false, "stat " + path + ": " + std::strerror(errno));
  ::close(fd);
  if (!ok) return TierGet::failed;
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // recency survives a restart
  std::lock_guard<std::mutex> lock(mu_);
  known_add(key, static_cast<int64_t>(out.size()));
  budget_keep();
  return TierGet::found;
}

bool DiskTier::present_mark(uint64_t key, int64_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = known_.find(key); it != known_.end()) {
      lru_.splice(lru_.end(), lru_, it->second.lru);
      return true;
    }
  }
  if (::access(path_of(key).c_str(), F_OK) != 0) return false;
  std::lock_guard<std::mutex> lock(mu_);  // written by another process
  known_add(key, bytes);
  budget_keep();
  return true;
}

TierPut DiskTier::put(uint64_t key, std::span<const char> record) {
  const TierPutItem item{key, record};
  TierPut result = TierPut::failed;
  put_batch(std::span(&item, 1), std::span(&result, 1));
  return result;
}

int DiskTier::temporary_write(uint64_t key, std::span<const char> record, std::string& tmp) {
  // Unique among every writer: host and pid name the process, the serial the write in it.
  static std::atomic<uint64_t> serial{0};
  tmp = root_ + "/tmp/" + tier_key_hex(key) + "." + tmp_prefix_ + "." + std::to_string(serial++) +
        ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    failure_note(true, "create " + tmp + ": " + std::strerror(err));
    errno = err;
    return -1;
  }
  const bool full = lim_.space_bytes > 0 &&
                    files_bytes(root_) + static_cast<int64_t>(record.size()) > lim_.space_bytes;
  const size_t half = record.size() / 2;
  bool ok = !full && write_all(fd, record.data(), half);
  if (ok && cfg_.write_delay_ms > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(cfg_.write_delay_ms));
  if (ok && write_all(fd, record.data() + half, record.size() - half)) return fd;
  const int err = full ? ENOSPC : errno;
  failure_note(true, "write " + tmp + ": " + std::strerror(err));
  ::close(fd);
  ::unlink(tmp.c_str());
  errno = err;
  return -1;
}

// One group commit: write every temporary, make their data durable with one sync, rename them
// all, make the names durable with one more sync. A name appears only after the data under it
// is durable, so a crash at any point leaves whole records and temporaries, as with one record.
//
// The sync for many files is syncfs(2) on the tier's filesystem, not fdatasync of each file:
// each fdatasync waits for its own journal commit and disk cache flush, syncfs for one that
// covers every file (ext4 on virtio, 256 records of 1 MiB in batches of 32: fsync per record
// 102 records/s, fdatasync of each file after all writes 104/s, syncfs 243/s; of 16 KiB:
// 120/s, 140/s, 521/s; bench/cache/disk_commit_bench compares put and put_batch). Its cost: it also
// writes back other processes' dirty data on that filesystem. Since Linux 5.8 syncfs reports any
// writeback error of the filesystem since the fd was opened (before the first write); on an error,
// perhaps another file's, fsync of each file finds ours. On older kernels, where syncfs reports
// none, a record damaged by a lost write fails its checksum at read and is removed, never used. A
// batch of one keeps fsync.
void DiskTier::put_batch(std::span<const TierPutItem> items, std::span<TierPut> results) {
  INVAR_CHECK(items.size() == results.size());
  struct Pending {
    size_t item;
    int fd;
    std::string tmp;
  };
  std::vector<Pending> pending;
  pending.reserve(items.size());
  // Opened before the first write, so that its syncfs reports every writeback error since.
  const int root_fd = ::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const auto counted = [&](int rc) {
    ++syncs_;
    return rc == 0;
  };
  for (size_t i = 0; i < items.size(); ++i) {
    const auto [key, record] = items[i];
    results[i] = TierPut::present;
    const bool earlier = std::any_of(pending.begin(), pending.end(),
                                     [&](const Pending& p) { return items[p.item].key == key; });
    if (earlier || present_mark(key, static_cast<int64_t>(record.size()))) continue;
    results[i] = TierPut::failed;
    // A full filesystem is the one failure this tier can remedy: its own least recently used
    // records make room, and the write is tried once more.
    for (int attempt = 0; attempt < 2; ++attempt) {
      std::string tmp;
      const int fd = temporary_write(key, record, tmp);
      if (fd >= 0) {
        pending.push_back({i, fd, std::move(tmp)});
        break;
      }
      if ((errno != ENOSPC && errno != EDQUOT) || attempt > 0 ||
          !space_make(static_cast<int64_t>(record.size())))
        break;
    }
  }
  if (pending.empty()) {
    if (root_fd >= 0) ::close(root_fd);
    return;
  }
  const bool group = pending.size() > 1 && root_fd >= 0;
  const bool group_synced = group && counted(::syncfs(root_fd));
  std::vector<std::string> dirs;
  for (const Pending& p : pending) {
    // The first step that fails names the error.
    const char* failed = nullptr;
    int err = 0;
    const auto step = [&](bool ok, const char* what) {
      if (!ok && failed == nullptr) {
        failed = what;
        err = errno;
      }
      return ok;
    };
    bool ok = group_synced || step(counted(::fsync(p.fd)), "fsync");
    ok = step(::close(p.fd) == 0, "close") && ok;
    const std::string path = path_of(items[p.item].key);
    const std::string dir = path.substr(0, path.rfind('/'));
    if (ok) {
      std::error_code ec;
      fs::create_directories(dir, ec);
      ok = step(::rename(p.tmp.c_str(), path.c_str()) == 0, "rename");
    }
    if (!ok) {
      failure_note(true, std::string(failed) + " " + p.tmp + ": " + std::strerror(err));
      ::unlink(p.tmp.c_str());
      // Space allocated at writeback (delayed allocation) fails here: make room for the next.
      if (err == ENOSPC || err == EDQUOT)
        space_make(static_cast<int64_t>(items[p.item].record.size()));
      continue;
    }
    results[p.item] = TierPut::written;
    dirs.push_back(dir);
  }
  std::sort(dirs.begin(), dirs.end());
  dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
  // Errors here are not the data's (durable already): at worst a name is lost in a crash.
  if (dirs.size() > 1 && root_fd >= 0)
    counted(::syncfs(root_fd));
  else
    for (const std::string& dir : dirs) counted(dir_sync(dir));
  if (root_fd >= 0) ::close(root_fd);
  std::lock_guard<std::mutex> lock(mu_);
  for (const Pending& p : pending)
    if (results[p.item] == TierPut::written)
      known_add(items[p.item].key, static_cast<int64_t>(items[p.item].record.size()));
  budget_keep();
}

void DiskTier::remove(uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  ::unlink(path_of(key).c_str());
  if (auto it = known_.find(key); it != known_.end()) {
    bytes_ -= it->second.bytes;
    lru_.erase(it->second.lru);
    known_.erase(it);
  }
}

int64_t DiskTier::bytes_stored() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

int64_t DiskTier::files_known() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(known_.size());
}

std::string DiskTier::describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  return "disk " + root_ + " (" + std::to_string(known_.size()) + " records, " +
         std::to_string(bytes_) + " of " + std::to_string(cfg_.budget_bytes) + " bytes; " +
         std::to_string(stale_removed_) + " stale temporary files removed)";
}

}  // namespace invar
