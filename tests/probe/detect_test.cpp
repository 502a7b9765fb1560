// The probe must be able to fail: against a fake server that moves one logprob by 1 ulp, or
// swaps two tied candidates, on cache hits, it reports the right first divergent token and the
// right digest kinds; against a well-behaved one it reports stable. Each test also checks that
// the cache hits it relies on really happened (cached_tokens > 0).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "fake_server.h"
#include "probe/report.h"
#include "probe/runner.h"
#include "probe/server_process.h"

namespace invar::probe {
namespace detect_test {

using probe_test::FakeConfig;
using probe_test::FakeMode;
using probe_test::FakeServer;
using probe_test::FakeShape;

Plan small_seed_plan(int runs = 3) {
  Plan p = plan_preset_seed("");
  for (auto& a : p.arms) {
    if (a.kind != ArmKind::threshold) a.runs = runs;
    a.span = 2;
    a.step = 1;
  }
  p.max_tokens = 8;
  return p;
}

const ArmSummary& arm(const Report& r, const std::string& name) {
  for (const auto& a : r.arms)
    if (a.name == name) return a;
  throw std::runtime_error("no arm " + name);
}

struct Running {
  FakeServer server;
  ProbeOptions o;
  explicit Running(FakeConfig cfg, Api api) : server(cfg) {
    o.url = "http://127.0.0.1:" + std::to_string(server.start());
    o.api = api;
  }
};

TEST(ProbeDetect, WellBehavedServerIsStable) {
  Running s({FakeMode::stable, FakeShape::openai}, Api::chat);
  Plan plan = small_seed_plan();
  Report r = probe_run(plan, s.o);
  EXPECT_EQ(r.verdict, "stable");
  EXPECT_EQ(report_exit_code(r), 0);
  EXPECT_EQ(r.model, "fake-model");
  EXPECT_TRUE(r.disagreeing_groups.empty());
  for (const auto& a : r.arms) {
    EXPECT_EQ(a.distinct_order, 1) << a.name;
    EXPECT_EQ(a.distinct_sorted, 1) << a.name;
    EXPECT_FALSE(a.first_divergent.has_value()) << a.name;
    EXPECT_EQ(a.max_abs_dlogprob, 0.0) << a.name;
  }
  // The condition really happened: repeats were cache hits, no-cache runs were not.
  const auto& clean = arm(r, "clean");
  ASSERT_EQ(clean.cached_tokens.size(), 3u);
  EXPECT_EQ(clean.cached_tokens[0], 0);
  EXPECT_GT(*clean.cached_tokens[1], 0);
  for (const auto& c : arm(r, "no-cache").cached_tokens) EXPECT_EQ(c, 0);
  EXPECT_EQ(arm(r, "threshold").runs, 5 * 2);
  EXPECT_EQ(arm(r, "threshold").cells.size(), 5u);
  EXPECT_EQ(s.server.requests(), int(plan_request_count(plan)));
  EXPECT_EQ(clean.fingerprints, std::vector<std::string>{"fp_fake"});
}

TEST(ProbeDetect, OneUlpOnHitIsCaughtAtItsPosition) {
  Running s({FakeMode::ulp_on_hit, FakeShape::openai, 3}, Api::completions);
  Report r = probe_run(small_seed_plan(), s.o);
  EXPECT_EQ(r.verdict, "diverged");
  EXPECT_EQ(report_exit_code(r), 3);
  const auto& clean = arm(r, "clean");
  EXPECT_GT(*clean.cached_tokens[1], 0);
  EXPECT_EQ(clean.distinct_order, 2);
  EXPECT_EQ(clean.distinct_sorted, 2);  // a real numeric change shows in the sorted digest too
  EXPECT_EQ(clean.distinct_text, 1);    // ... while the text stays the same
  EXPECT_FALSE(clean.texts_differ);
  EXPECT_EQ(clean.first_divergent, 3);
  EXPECT_GT(clean.max_abs_dlogprob, 0.0);
  EXPECT_LT(clean.max_abs_dlogprob, 1e-6);  // one float ulp
  EXPECT_EQ(clean.candidate_set_changes, 0);
  ASSERT_EQ(clean.dlogprob_by_position.size(), 8u);
  EXPECT_EQ(clean.dlogprob_by_position[2], 0.0);
  EXPECT_GT(clean.dlogprob_by_position[3], 0.0);
  const auto& nocache = arm(r, "no-cache");
  EXPECT_EQ(nocache.distinct_order, 1);
  for (const auto& c : nocache.cached_tokens) EXPECT_EQ(c, 0);
}

TEST(ProbeDetect, ReorderOfTiesChangesOrderDigestNotSorted) {
  Running s({FakeMode::reorder_on_hit, FakeShape::llamacpp, 5}, Api::chat);
  Report r = probe_run(small_seed_plan(), s.o);
  EXPECT_EQ(r.verdict, "diverged");
  const auto& clean = arm(r, "clean");
  EXPECT_GT(*clean.cached_tokens[1], 0);
  EXPECT_EQ(clean.distinct_order, 2);
  EXPECT_EQ(clean.distinct_sorted, 1);
  EXPECT_EQ(clean.distinct_text, 1);
  EXPECT_EQ(clean.first_divergent, 5);
  EXPECT_EQ(clean.max_abs_dlogprob, 0.0);
  EXPECT_EQ(clean.candidate_set_changes, 0);
  EXPECT_EQ(arm(r, "no-cache").distinct_order, 1);
}

TEST(ProbeDetect, MixedOriginHitsLikeTheWriteUp) {
  // Only a shorter request that wrote the shared prefix first poisons it: clean and no-cache
  // stay stable, contaminated diverges from its second run, threshold flips below a length.
  Plan plan = small_seed_plan(4);
  FakeConfig cfg{FakeMode::mixed_origin, FakeShape::llamacpp, 2};
  cfg.origin_threshold = task_prompt(plan, plan_task(plan, "A"), plan.arms[3].span).size();
  Running s(cfg, Api::completions);
  Report r = probe_run(plan, s.o);
  EXPECT_EQ(r.verdict, "diverged");
  EXPECT_EQ(arm(r, "clean").distinct_order, 1);
  EXPECT_EQ(arm(r, "no-cache").distinct_order, 1);
  const auto& cont = arm(r, "contaminated");
  EXPECT_EQ(cont.distinct_order, 2);
  EXPECT_EQ(cont.first_divergent, 2);
  EXPECT_EQ(cont.cached_tokens[0], 0);
  EXPECT_GT(*cont.cached_tokens[1], 0);
  const auto& th = arm(r, "threshold");
  ASSERT_EQ(th.cells.size(), 5u);
  for (const auto& c : th.cells) EXPECT_EQ(c.flipped, c.delta < 0) << "delta " << c.delta;
  // clean, contaminated's first run and no-cache share one digest; the contaminated hits do not.
  ASSERT_EQ(r.disagreeing_groups.size(), 1u);
  EXPECT_EQ(arm(r, "clean").order_digests[0], cont.order_digests[0]);
}

TEST(ProbeDetect, RecordsAreWrittenAsJsonl) {
  Running s({FakeMode::stable, FakeShape::openai}, Api::chat);
  s.o.out_dir =
      (std::filesystem::temp_directory_path() / ("probe-records-" + std::to_string(getpid())))
          .string();
  Plan plan = small_seed_plan(2);
  std::vector<RunRecord> records;
  probe_run(plan, s.o, &records);
  std::ifstream f(std::filesystem::path(s.o.out_dir) / "records.jsonl");
  std::string line;
  size_t n = 0;
  while (std::getline(f, line)) {
    json j = json::parse(line);
    EXPECT_EQ(j["digests"]["order"], records[n].digests.order);
    EXPECT_EQ(j["completion"]["tokens"].size(), 8u);
    EXPECT_EQ(j["completion"]["tokens"][0]["top"].size(), 20u);
    // The stored record digests to the same value: raw lists are kept exactly.
    EXPECT_EQ(completion_digests(completion_from_json(j["completion"])).order,
              records[n].digests.order);
    n++;
  }
  EXPECT_EQ(n, size_t(plan_request_count(plan)));
  std::filesystem::remove_all(s.o.out_dir);
}

TEST(ProbeDetect, ServerCmdGivesEveryArmAFreshServer) {
  // No salts: only a fresh server per arm keeps the arms apart. The no-cache arm runs on its own
  // command (a well-behaved server with another fingerprint).
  Plan plan = small_seed_plan();
  plan.cache_salt = false;
  ProbeOptions o;
  o.server_cmd = std::string(PROBE_FAKE_SERVER) + " {port} ulp openai fp_cached";
  o.server_cmd_nocache = std::string(PROBE_FAKE_SERVER) + " {port} stable openai fp_nocache";
  o.out_dir =
      (std::filesystem::temp_directory_path() / ("probe-cmd-" + std::to_string(getpid()))).string();
  o.health_timeout_s = 20;
  Report r = probe_run(plan, o);
  const auto& cont = arm(r, "contaminated");
  EXPECT_EQ(cont.cached_tokens[0], 0);  // on a shared server it would hit the clean arm's cache
  EXPECT_GT(*cont.cached_tokens[1], 0);
  EXPECT_EQ(cont.first_divergent, 3);
  EXPECT_EQ(arm(r, "no-cache").fingerprints, std::vector<std::string>{"fp_nocache"});
  EXPECT_EQ(arm(r, "no-cache").distinct_order, 1);
  EXPECT_EQ(arm(r, "clean").fingerprints, std::vector<std::string>{"fp_cached"});
  EXPECT_EQ(r.verdict, "diverged");
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(o.out_dir) / "server-clean.log"));
  std::filesystem::remove_all(o.out_dir);
}

TEST(ProbeDetect, ErrorsAreErrors) {
  Plan plan = small_seed_plan(1);
  ProbeOptions o;
  o.server_cmd = "exit 3 # {port}";
  o.health_timeout_s = 10;
  try {
    probe_run(plan, o);
    FAIL() << "a server that exits must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exited before"), std::string::npos) << e.what();
  }
  EXPECT_THROW(server_cmd_expand("serve --port 8000", 1), Error);
  EXPECT_EQ(server_cmd_expand("serve --port {port} # {port}", 42), "serve --port 42 # 42");
  // A server that answers 400 (here: the fake rejects a body without messages on chat).
  Running s({FakeMode::stable, FakeShape::openai}, Api::chat);
  plan.request = {{"messages", "not a list"}};
  try {
    probe_run(plan, s.o);
    FAIL() << "an HTTP error must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("HTTP 400"), std::string::npos) << e.what();
  }
  ProbeOptions dead;
  dead.url = "http://127.0.0.1:" + std::to_string(port_free_find());
  dead.timeout_s = 2;
  EXPECT_THROW(probe_run(plan, dead), Error);
}

}  // namespace detect_test
}  // namespace invar::probe
