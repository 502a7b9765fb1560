// `invar bench fleet --quick` through the binary on the tiny model: 2 replicas behind a real
// nginx (and a real Redis for its arm) started by the bench itself, every arm run, the table
// printed with no failed request, and a tenant routed to one replica by its X-Cache-Salt header
// served from that replica's prefix cache. No time is asserted.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <string>

#include "command_run.h"
#include "test_process_dir.h"

namespace invar::test {
namespace {

const std::string kInvar = std::string(INVAR_BINARY_DIR) + "/apps/invar/invar";
const std::string kModel = std::string(INVAR_TEST_DATA_DIR) + "/models/qwen3next-tiny.gguf";

TEST(BenchFleet, QuickRunsEveryArmWithoutErrors) {
  const std::string dir = test_process_dir("bench/fleet");
  const CommandResult r = command_run(kInvar + " bench fleet --quick --model " + kModel +
                                      " --work-dir " + dir + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("2 replicas behind nginx, 8 requests, 2 tenants x 60-word prefix"),
            std::string::npos)
      << r.out;
  // arm, shared tier, routing, hit rate, TTFT p50, TTFT p99, errors.
  const std::regex row(R"((\w+) +(\S+) +(\S+) +([0-9.]+)% +[0-9.]+s +[0-9.]+s +(\d+) )");
  std::map<std::string, double> hit_rate;
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), row), end; it != end; ++it) {
    const std::smatch& m = *it;
    hit_rate[m[1]] = std::stod(m[4]);
    EXPECT_EQ(m[5], "0") << "failed requests in arm " << m[1] << "\n" << r.out;
  }
  for (const char* arm : {"spread", "affinity", "disk", "redis"})
    EXPECT_EQ(hit_rate.count(arm), 1u) << "no row for arm " << arm << "\n" << r.out;
  EXPECT_GT(hit_rate["affinity"], 0) << "a tenant's replica never reused its prefix\n" << r.out;
}

}  // namespace
}  // namespace invar::test
