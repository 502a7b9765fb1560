// The model file's SHA-256 kept between starts (model/sha256_cache.h): an entry is used only for
// the very same file version, a changed file is hashed again, and a hash is never recorded for a
// file that changed too recently to tell two versions apart by their times.
#include "model/sha256_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/sha256.h"
#include "model/model.h"

namespace invar {
namespace {

namespace fs = std::filesystem;

std::string temp_dir() {
  const fs::path d =
      fs::temp_directory_path() / ("invar-sha256-cache-" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d.string();
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(Sha256Cache, AnEntryMatchesOnlyTheSameIdentity) {
  const std::string dir = temp_dir() + "/entries", file = temp_dir() + "/f.bin";
  std::ofstream(file) << "contents";
  const FileIdentity id = *file_identity_of(file);
  const std::string hex = sha256_hex("contents");
  EXPECT_FALSE(sha256_cache_find(dir, id));
  // Hashed right after a change: not recorded (a second change in the same tick would keep the
  // same times).
  EXPECT_TRUE(contains(sha256_cache_store(dir, id, hex, realtime_ns()), "changed less than"));
  EXPECT_FALSE(sha256_cache_find(dir, id));
  EXPECT_EQ(sha256_cache_store(dir, id, hex, id.ctime_ns + kSha256CacheSettleNs + 1), "");
  EXPECT_EQ(sha256_cache_find(dir, id), hex);
  // Any field that differs makes the entry someone else's.
  for (int field = 0; field < 5; ++field) {
    FileIdentity other = id;
    if (field == 0) other.dev += 1;
    if (field == 1) other.ino += 1;
    if (field == 2) other.size += 1;
    if (field == 3) other.mtime_ns += 1;
    if (field == 4) other.ctime_ns += 1;
    EXPECT_FALSE(sha256_cache_find(dir, other)) << "field " << field;
  }
  // A damaged entry is not used.
  const std::string entry =
      dir + "/" + std::to_string(id.dev) + "-" + std::to_string(id.ino) + ".sha256";
  const std::string good = read_all(entry);
  ASSERT_FALSE(good.empty());
  std::ofstream(entry, std::ios::trunc) << good.substr(0, good.size() - 3) << "\n";
  EXPECT_FALSE(sha256_cache_find(dir, id));
  std::ofstream(entry, std::ios::trunc) << good << "more\n";
  EXPECT_FALSE(sha256_cache_find(dir, id));
  // A directory that cannot be written is reported, not thrown.
  EXPECT_NE(sha256_cache_store(file + "/sub", id, hex, id.ctime_ns + kSha256CacheSettleNs + 1), "");
  fs::remove_all(dir);
  fs::remove(file);
}

TEST(Sha256Cache, ModelHashIsReusedUntilTheFileChanges) {
  const std::string dir = temp_dir() + "/model-entries", path = temp_dir() + "/m.gguf";
  fs::copy_file(std::string(INVAR_TEST_DATA_DIR) + "/models/qwen35-tiny.gguf", path,
                fs::copy_options::overwrite_existing);
  const std::string want = sha256_hex(read_all(path));
  // A hash is recorded only for a file older than the settle time.
  std::this_thread::sleep_for(std::chrono::nanoseconds(kSha256CacheSettleNs + 100000000));

  auto first = Model::load(path);
  first->sha256_start(dir);
  EXPECT_EQ(first->sha256(), want);
  EXPECT_TRUE(contains(first->sha256_origin(), "computed")) << first->sha256_origin();
  EXPECT_TRUE(contains(first->sha256_origin(), "recorded in " + dir)) << first->sha256_origin();

  auto second = Model::load(path);
  second->sha256_start(dir);
  EXPECT_EQ(second->sha256(), want);
  EXPECT_TRUE(contains(second->sha256_origin(), "recorded in " + dir + " for this file"))
      << second->sha256_origin();
  EXPECT_FALSE(contains(second->sha256_origin(), "computed"));

  // One byte changed in place, same size, and its mtime set back: the ctime still moves, so the
  // entry is not used and the new bytes get a new hash.
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  const int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const char byte = char(read_all(path).back() ^ 1);
  ASSERT_EQ(::pwrite(fd, &byte, 1, off_t(before.st_size - 1)), 1);
  const timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::futimens(fd, times), 0);
  ::close(fd);
  const std::string changed = sha256_hex(read_all(path));
  ASSERT_NE(changed, want);
  auto third = Model::load(path);
  third->sha256_start(dir);
  EXPECT_EQ(third->sha256(), changed);
  EXPECT_TRUE(contains(third->sha256_origin(), "computed")) << third->sha256_origin();
  EXPECT_TRUE(contains(third->sha256_origin(), "not recorded: the file changed less than"))
      << third->sha256_origin();

  // Without a directory the file is hashed every time.
  auto plain = Model::load(path);
  EXPECT_EQ(plain->sha256(), changed);
  EXPECT_TRUE(contains(plain->sha256_origin(), "computed"));
  first.reset();
  second.reset();
  third.reset();
  plain.reset();
  fs::remove_all(temp_dir());
}

}  // namespace
}  // namespace invar
