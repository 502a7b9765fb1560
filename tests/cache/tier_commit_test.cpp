// Group commits of the disk tier: a batch of records costs two syncs, not two per record; the
// writer thread batches what is queued together, never waits for more than the commit delay
// after a record, and writes everything out for writes_wait and on destruction; a process killed
// in the middle of a batch leaves whole records and temporary files, which the next start
// removes. No test here reads a clock: the delays are either far longer than any test (so a
// writer that waited them out would hit the test's timeout) or awaited through the counters.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "cache/disk_tier.h"
#include "cache/lower_tiers.h"
#include "cache/tier_files.h"
#include "cache/tier_record.h"

namespace invar {
namespace tier_commit_test {

namespace fs = std::filesystem;

constexpr int64_t kBs = 4;
constexpr int64_t kKvFloats = 24;
constexpr int64_t kStateFloats = 40;
constexpr int64_t kForever = 600'000;  // ms: longer than the test's timeout

const TierShape& shape() {
  static const TierShape s{"fp_commit0123456789", kBs, kKvFloats, kStateFloats};
  return s;
}

const TierSecret& secret() {
  static const TierSecret s = tier_secret_derive(std::vector<unsigned char>(32, 'c'), "test");
  return s;
}

// The name a chain key is filed under, as LowerTiers files it.
uint64_t name_of(uint64_t key) {
  return tier_record_name(secret(), key);
}

// Record i sealed for its name.
void record_make(uint64_t i, std::vector<char>& out);

using testing::files_under;
using testing::tier_temp_dir;

// Record i: its key spreads the records over many subdirectories; its contents derive from i.
struct Block {
  uint64_t key;
  std::vector<int32_t> tokens;
  std::vector<float> kv, state;
  TierBlock view() const { return TierBlock{key, 0, tokens, kv, state, true, {}}; }
};

Block block_make(uint64_t i) {
  Block b;
  b.key = (i + 1) * 0x9E3779B97F4A7C15ull;
  b.tokens.assign(kBs, static_cast<int32_t>(i));
  b.kv.assign(kKvFloats, static_cast<float>(i) + 0.5f);
  b.state.assign(kStateFloats, -static_cast<float>(i));
  return b;
}

void record_make(uint64_t i, std::vector<char>& out) {
  const Block b = block_make(i);
  tier_record_encode(shape(), b.view(), out);
  tier_record_seal(secret(), name_of(b.key), out);
}

// Every record 0..n-1 reads back whole from a fresh tier over dir.
void expect_records_whole(const std::string& dir, uint64_t n) {
  DiskTier d({dir, 1 << 30, shape().fingerprint, 0});
  std::vector<char> back;
  std::vector<char> plain;
  TierBlock got;
  for (uint64_t i = 0; i < n; ++i) {
    const Block b = block_make(i);
    ASSERT_EQ(d.get(name_of(b.key), back), TierGet::found) << "record " << i;
    EXPECT_EQ(
        tier_record_open(secret(), shape(), back, name_of(b.key), b.key, 0, b.tokens, plain, got),
        RecordCheck::ok)
        << i;
  }
}

TEST(TierCommit, ABatchCostsTwoSyncsAndReadsBackWhole) {
  const std::string dir = tier_temp_dir("commit-batch");
  constexpr uint64_t kRecords = 16;
  std::vector<std::vector<char>> records(kRecords);
  std::vector<TierPutItem> items;
  for (uint64_t i = 0; i < kRecords; ++i) {
    record_make(i, records[i]);
    items.push_back({name_of(block_make(i).key), records[i]});
  }
  {
    DiskTier d({dir, 1 << 30, shape().fingerprint, 0});
    std::vector<TierPut> results(kRecords, TierPut::failed);
    d.put_batch(items, results);
    for (uint64_t i = 0; i < kRecords; ++i) EXPECT_EQ(results[i], TierPut::written) << i;
    EXPECT_EQ(d.syncs(), 2) << "one sync for the data of all records, one for their names";
    EXPECT_EQ(d.files_known(), static_cast<int64_t>(kRecords));

    // Again, with a new record twice: the others are present, the new one written once.
    std::vector<char> extra;
    record_make(kRecords, extra);
    items.push_back({name_of(block_make(kRecords).key), extra});
    items.push_back({name_of(block_make(kRecords).key), extra});
    results.assign(items.size(), TierPut::failed);
    d.put_batch(items, results);
    for (uint64_t i = 0; i < kRecords; ++i) EXPECT_EQ(results[i], TierPut::present) << i;
    EXPECT_EQ(results[kRecords], TierPut::written);
    EXPECT_EQ(results[kRecords + 1], TierPut::present) << "a key twice in a batch: one file";
    EXPECT_EQ(d.syncs(), 2 + 2) << "a batch of one record: fsync of the file, of its directory";

    // One record at a time, as before group commits: two syncs each.
    DiskTier single({dir + "/single", 1 << 30, shape().fingerprint, 0});
    for (uint64_t i = 0; i < 4; ++i)
      EXPECT_EQ(single.put(items[i].key, records[i]), TierPut::written);
    EXPECT_EQ(single.syncs(), 8);
  }
  EXPECT_TRUE(files_under(dir, ".tmp").empty());
  expect_records_whole(dir, kRecords + 1);
  fs::remove_all(dir);
}

TierConfig writer_config(const std::string& dir, int64_t delay_ms, int64_t records) {
  TierConfig tc;
  tc.cache_dir = dir;
  tc.commit_delay_ms = delay_ms;
  tc.commit_records = records;
  return tc;
}

// The writer never waits out the delay here (kForever): it commits when a batch is full, and
// writes_wait ends the wait for the rest.
TEST(TierCommit, RecordsQueuedTogetherShareCommits) {
  const std::string dir = tier_temp_dir("commit-together");
  constexpr uint64_t kRecords = 20;
  {
    LowerTiers tiers(writer_config(dir, kForever, 8), shape(), secret());
    for (uint64_t i = 0; i < kRecords; ++i) tiers.block_offer(block_make(i).view());
    tiers.writes_wait();
    const TierReport r = tiers.report().tiers.at(0);
    EXPECT_EQ(r.writes, static_cast<int64_t>(kRecords));
    EXPECT_EQ(r.write_failures, 0);
    EXPECT_EQ(r.commits, 3) << "batches of 8, 8 and the 4 writes_wait asked for";
    EXPECT_EQ(tiers.report().queue_bytes, 0);
  }
  expect_records_whole(dir, kRecords);
  fs::remove_all(dir);
}

// A lone record is written once the delay after it has passed, with no writes_wait and nothing
// else queued: the writer's wait is bounded. Awaited through the counter; the test's own
// timeout is the failure bound.
TEST(TierCommit, ALoneRecordIsWrittenAfterTheDelay) {
  for (const int64_t delay_ms : {int64_t{0}, int64_t{20}}) {
    const std::string dir = tier_temp_dir("commit-lone");
    LowerTiers tiers(writer_config(dir, delay_ms, 32), shape(), secret());
    tiers.block_offer(block_make(0).view());
    while (tiers.report().tiers.at(0).writes == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const TierReport r = tiers.report().tiers.at(0);
    EXPECT_EQ(r.writes, 1) << delay_ms;
    EXPECT_EQ(r.commits, 1) << delay_ms;
    EXPECT_EQ(files_under(dir, ".blk").size(), 1u) << delay_ms;
    fs::remove_all(dir);
  }
}

// Destruction (SIGTERM's path) writes the queue out at once, the delay notwithstanding.
TEST(TierCommit, DestructionWritesTheQueueOutWithoutWaiting) {
  const std::string dir = tier_temp_dir("commit-destroy");
  {
    LowerTiers tiers(writer_config(dir, kForever, 32), shape(), secret());
    for (uint64_t i = 0; i < 5; ++i) tiers.block_offer(block_make(i).view());
  }
  expect_records_whole(dir, 5);
  EXPECT_TRUE(files_under(dir, ".tmp").empty());
  fs::remove_all(dir);
}

// A writer killed in the middle of its second batch (each file write pauses half-way): the first
// batch's records are whole files, the second's only temporaries, which the next start removes.
TEST(TierCommit, KillInTheMiddleOfABatchLeavesWholeFilesAndTemporaries) {
  const std::string dir = tier_temp_dir("commit-kill");
  constexpr uint64_t kBatch = 6;
  const pid_t child = fork();
  if (child == 0) {
    DiskTier d({dir, 1 << 30, shape().fingerprint, /*write_delay_ms=*/100});
    std::vector<std::vector<char>> records(2 * kBatch);
    std::vector<TierPutItem> items;
    for (uint64_t i = 0; i < 2 * kBatch; ++i) {
      record_make(i, records[i]);
      items.push_back({name_of(block_make(i).key), records[i]});
    }
    std::vector<TierPut> results(kBatch);
    d.put_batch(std::span(items).first(kBatch), results);
    d.put_batch(std::span(items).last(kBatch), results);
    _exit(0);
  }
  ASSERT_GT(child, 0);
  // The kill comes once the first batch is renamed and the second has a temporary file.
  bool mid_batch = false;
  for (int i = 0; i < 20000 && !mid_batch; ++i) {
    mid_batch = files_under(dir, ".blk").size() == kBatch && !files_under(dir, ".tmp").empty();
    if (!mid_batch) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(mid_batch) << "the second batch was never seen in progress";
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(files_under(dir, ".blk").size(), kBatch) << "a record of the second batch was named";
  const auto temporaries = static_cast<int64_t>(files_under(dir, ".tmp").size());
  EXPECT_GE(temporaries, 1);
  DiskTier again({dir, 1 << 30, shape().fingerprint, 0});
  EXPECT_EQ(again.stale_temporaries_removed(), temporaries);
  EXPECT_TRUE(files_under(dir, ".tmp").empty());
  EXPECT_EQ(again.files_known(), static_cast<int64_t>(kBatch));
  expect_records_whole(dir, kBatch);
  fs::remove_all(dir);
}

}  // namespace tier_commit_test
}  // namespace invar
