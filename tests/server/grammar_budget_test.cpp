// Memory a flood of constraints may take: every request carries a different schema of a few
// hundred bytes that compiles to megabytes (a counted string is a chain of rules). The compile
// cache keeps what --grammar-cache-bytes allows, whatever the number of requests, and /metrics
// says what it holds.
#include <gtest/gtest.h>

#include "fake_server.h"
#include "http_test_util.h"

namespace grammar_budget_test {

using namespace invar::server;
using namespace invar::server::testing;
using json = nlohmann::json;

namespace {

TEST(GrammarBudget, FloodOfSchemasStaysWithinTheCacheBudget) {
  ServerConfig cfg;
  cfg.grammar_cache_bytes = 2 << 20;
  FakeServer s(cfg);
  const auto metrics = [&] {
    auto r = s.get("/metrics");
    EXPECT_TRUE(r && r->status == 200);
    return r ? r->body : std::string();
  };
  const double compiles = metric_value(metrics(), "invar_grammar_compiles_total");
  const double evictions = metric_value(metrics(), "invar_grammar_cache_evictions_total");
  constexpr int kRequests = 12;
  for (int i = 0; i < kRequests; ++i) {
    const json schema = {
        {"type", "object"},
        {"properties",
         {{"text", {{"type", "string"}, {"maxLength", 3000}}}, {"n", {{"const", 1000 + i}}}}}};
    const json body = {
        {"prompt", "a"},
        {"max_tokens", 1},
        {"response_format",
         {{"type", "json_schema"}, {"json_schema", {{"name", "flood"}, {"schema", schema}}}}}};
    auto r = s.post("/v1/completions", body.dump());
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_LE(metric_value(metrics(), "invar_grammar_cache_bytes"), double(2 << 20)) << i;
  }
  const std::string m = metrics();
  EXPECT_EQ(metric_value(m, "invar_grammar_compiles_total") - compiles, kRequests);
  EXPECT_EQ(metric_value(m, "invar_grammar_cache_max_bytes"), double(2 << 20));
  EXPECT_GT(metric_value(m, "invar_grammar_cache_bytes"), 0);
  // The budget really bound the cache: several grammars did not fit it together.
  EXPECT_GE(metric_value(m, "invar_grammar_cache_evictions_total") - evictions, kRequests / 2);
  EXPECT_EQ(metric_value(m, "invar_grammar_compiles_running"), 0);
}

}  // namespace
}  // namespace grammar_budget_test
