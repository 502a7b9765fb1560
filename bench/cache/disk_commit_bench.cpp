// What group commits buy the disk tier: RECORDS records of BYTES each written through DiskTier
// one at a time (put: fsync of the file and of its directory per record) and in batches
// (put_batch: one sync for all the data, one for all the names), rounds interleaved (A B C A B C)
// so a busy disk hurts each mode alike. DIR must be on the disk under test: on tmpfs a sync is
// free and the table means nothing (the first line names the filesystem).
// Usage: disk_commit_bench [DIR=.] [RECORDS=256] [BYTES=1048576] [ROUNDS=3]
#include <sys/vfs.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cache/disk_tier.h"

namespace {

namespace fs = std::filesystem;

const char* fs_name(const std::string& dir) {
  struct statfs s {};
  if (::statfs(dir.c_str(), &s) != 0) return "unknown";
  switch (static_cast<unsigned long>(s.f_type)) {
    case 0xEF53:
      return "ext2/3/4";
    case 0x58465342:
      return "xfs";
    case 0x9123683E:
      return "btrfs";
    case 0x01021994:
      return "tmpfs (syncs are free: measure elsewhere)";
    case 0x794C7630:
      return "overlayfs";
    case 0x6969:
      return "nfs";
    default:
      return "other";
  }
}

struct Run {
  double seconds;
  int64_t syncs;
};

// Writes every record through a fresh tier in batches of `batch` (0: put, one at a time).
Run run(const std::string& dir, const std::vector<std::vector<char>>& records, size_t batch) {
  const std::string fp = "bench_" + std::to_string(batch);
  fs::remove_all(dir + "/" + fp);
  invar::DiskTier d({dir, int64_t{1} << 40, fp, 0});
  std::vector<invar::TierPutItem> items;
  std::vector<invar::TierPut> results;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < records.size();) {
    const uint64_t key = (i + 1) * 0x9E3779B97F4A7C15ull;  // spread over the subdirectories
    if (batch == 0) {
      if (d.put(key, records[i++]) != invar::TierPut::written) std::abort();
      continue;
    }
    items.clear();
    for (; i < records.size() && items.size() < batch; ++i)
      items.push_back({(i + 1) * 0x9E3779B97F4A7C15ull, records[i]});
    results.assign(items.size(), invar::TierPut::failed);
    d.put_batch(items, results);
    for (invar::TierPut r : results)
      if (r != invar::TierPut::written) std::abort();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const Run r{s, d.syncs()};
  fs::remove_all(dir + "/" + fp);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : ".";
  const size_t n = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 256;
  const size_t bytes = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : size_t{1} << 20;
  const int rounds = argc > 4 ? std::max(1, std::atoi(argv[4])) : 3;
  std::vector<std::vector<char>> records(n, std::vector<char>(bytes));
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < bytes; ++j) records[i][j] = static_cast<char>((i * 131 + j * 7) >> 3);
  const std::vector<size_t> batches = {0, 8, 32, 64};
  std::vector<std::vector<Run>> runs(batches.size());
  for (int r = 0; r < rounds; ++r)
    for (size_t m = 0; m < batches.size(); ++m) runs[m].push_back(run(dir, records, batches[m]));
  std::printf("%s on %s: %zu records of %zu bytes, %d rounds interleaved, median\n", dir.c_str(),
              fs_name(dir), n, bytes, rounds);
  std::printf("%-22s %10s %12s %8s %14s\n", "writes", "seconds", "records/s", "syncs",
              "syncs/record");
  for (size_t m = 0; m < batches.size(); ++m) {
    std::sort(runs[m].begin(), runs[m].end(),
              [](const Run& a, const Run& b) { return a.seconds < b.seconds; });
    const Run& med = runs[m][runs[m].size() / 2];
    const std::string name = batches[m] == 0 ? std::string("one per commit (put)")
                                             : "group of " + std::to_string(batches[m]);
    std::printf("%-22s %10.3f %12.1f %8lld %14.3f\n", name.c_str(), med.seconds,
                double(n) / med.seconds, static_cast<long long>(med.syncs),
                double(med.syncs) / double(n));
  }
  return 0;
}
