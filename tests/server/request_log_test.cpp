// The request log's line formats: JSON parses back to the record; text keeps one line whatever
// the client put in its strings.
#include "server/request_log.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace request_log_test {

using namespace invar::server;

namespace {

RequestRecord sample_record() {
  RequestRecord r;
  r.id = "chatcmpl-x";
  r.method = "POST";
  r.path = "/v1/chat/completions";
  r.status = 200;
  r.model = "tiny";
  r.user = "eve\n status=500 forged=1";
  r.n = 2;
  r.seed = 18446744073709551615ull;
  r.usage.prompt_tokens = 12;
  r.usage.cached_tokens = 8;
  r.usage.completion_tokens = 30;
  r.ttft_s = 0.0125;
  r.duration_s = 0.5;
  return r;
}

TEST(RequestLog, JsonLineCarriesEveryField) {
  auto j = nlohmann::json::parse(request_log_line(sample_record(), LogFormat::json));
  EXPECT_EQ(j["id"], "chatcmpl-x");
  EXPECT_EQ(j["endpoint"], "/v1/chat/completions");
  EXPECT_EQ(j["status"], 200);
  EXPECT_EQ(j["seed"].get<uint64_t>(), 18446744073709551615ull);
  EXPECT_EQ(j["prompt_tokens"], 12);
  EXPECT_EQ(j["cached_tokens"], 8);
  EXPECT_EQ(j["completion_tokens"], 30);
  EXPECT_DOUBLE_EQ(j["ttft_s"].get<double>(), 0.0125);
  EXPECT_DOUBLE_EQ(j["duration_s"].get<double>(), 0.5);
  EXPECT_TRUE(j["time"].is_string());
  RequestRecord health;
  health.id = request_log_id();
  health.method = "GET";
  health.path = "/health";
  health.status = 200;
  auto h = nlohmann::json::parse(request_log_line(health, LogFormat::json));
  EXPECT_TRUE(h["seed"].is_null());
  EXPECT_TRUE(h["ttft_s"].is_null());
  EXPECT_EQ(h["id"].get<std::string>().rfind("req-", 0), 0u);
}

TEST(RequestLog, TextLineCannotBeForged) {
  std::string line = request_log_line(sample_record(), LogFormat::text);
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_NE(line.find(" status=200 "), std::string::npos) << line;
  EXPECT_NE(line.find(R"(user="eve\n status=500 forged=1")"), std::string::npos) << line;
  EXPECT_NE(line.find(" seed=18446744073709551615 "), std::string::npos) << line;
  EXPECT_NE(line.find(" ttft_s=0.0125 "), std::string::npos) << line;
}

}  // namespace

}  // namespace request_log_test
