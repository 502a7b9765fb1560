// Three real `invar serve` replicas (tiny reference model) sharing a real redis-server, behind a
// real nginx on loopback configured by deploy/nginx/render-nginx-conf: the probe through nginx
// reports stable while requests spread over the replicas; a prefix warmed on replica 1 is a hit
// on replica 2 through Redis with the same bits; killing the replica that serves a stream loses
// no later request (nginx retries the refused connection on the next replica).
#include <gtest/gtest.h>
#include <httplib.h>

#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "cache/redis_process.h"
#include "command_run.h"
#include "fleet/fleet_processes.h"
#include "server/serve_process.h"

using namespace invar::fleet::testing;
using invar::server::testing::kInvarBin;
using invar::server::testing::kTinyModel;
using invar::server::testing::metric_value;
using invar::server::testing::ServeProcess;
using json = nlohmann::json;

namespace {

constexpr int kReplicas = 3;

class Fleet : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(scratch_dir("invar-fleet-nginx"));
    redis_ = new invar::testing::RedisProcess();
    // The secret every replica sharing Redis holds.
    const std::string key = invar::testing::tier_key_file((*dir_ / "tier.key").string(), 'f');
    std::vector<std::string> upstreams;
    for (int i = 0; i < kReplicas; ++i) {
      replicas_[i] =
          new ServeProcess({"--model", kTinyModel, "--threads", "1", "--block-size", "16", "--ctx",
                            "4096", "--cache-redis", redis_->url(), "--cache-tier-key", key},
                           "fleet_nginx_replica" + std::to_string(i));
      upstreams.push_back("127.0.0.1:" + std::to_string(replicas_[i]->port()));
    }
    // Requests without a routing header spread over the replicas, so the probe's cells are
    // answered by different processes.
    nginx_ = new NginxProcess(*dir_ / "nginx", upstreams, "--fallback spread");
  }
  static void TearDownTestSuite() {
    delete nginx_;
    for (auto*& r : replicas_) delete std::exchange(r, nullptr);
    delete redis_;
    fs::remove_all(*dir_);
    delete dir_;
  }
  void SetUp() override {
    ASSERT_NE(redis_->port(), 0) << redis_->failure();
    for (auto* r : replicas_) ASSERT_NE(r->port(), 0) << "replica did not start:\n" << r->log();
    ASSERT_NE(nginx_->port(), 0) << nginx_->error();
  }

  static httplib::Client nginx_client() {
    httplib::Client c("127.0.0.1", nginx_->port());
    c.set_read_timeout(120, 0);
    return c;
  }
  static json completion_body(const std::string& salt, int max_tokens, bool stream) {
    return {{"prompt", "The fleet test asks tenant " + salt + " to count: one two three"},
            {"max_tokens", max_tokens},
            {"temperature", 0},
            {"ignore_eos", true},
            {"stream", stream},
            {"cache_salt", salt}};
  }
  // Upstream addresses nginx logged for each request whose X-Request-Id starts with `label`.
  static std::vector<std::string> upstreams_of(const std::string& label) {
    std::vector<std::string> out;
    std::regex line_re("request_id=" + label +
                       "[^ ]* upstream=([^ ]+(?:, [^ ]+)*) upstream_status");
    std::string log = nginx_->access_log();
    for (std::sregex_iterator it(log.begin(), log.end(), line_re), end; it != end; ++it)
      out.push_back((*it)[1]);
    return out;
  }

  static fs::path* dir_;
  static invar::testing::RedisProcess* redis_;
  static ServeProcess* replicas_[kReplicas];
  static NginxProcess* nginx_;
};

fs::path* Fleet::dir_ = nullptr;
invar::testing::RedisProcess* Fleet::redis_ = nullptr;
ServeProcess* Fleet::replicas_[kReplicas] = {};
NginxProcess* Fleet::nginx_ = nullptr;

TEST_F(Fleet, ProbeThroughNginxReportsStable) {
  const std::string before = nginx_->access_log();
  auto r = invar::test::command_run(
      kInvarBin + " probe --url " + nginx_->url() +
      " --api completions --preset seed --doc-chars 1200 --runs 2 --max-tokens 4"
      " --threshold-span 1 --threshold-step 1 --json 2>&1");
  ASSERT_EQ(r.status, 0) << "probe through nginx did not report stable:\n" << r.out;
  const json report = json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(report.value("verdict", ""), "stable") << r.out;
  // The probe's completions reached more than one replica: the bits held across processes.
  std::set<std::string> served;
  std::string log = nginx_->access_log().substr(before.size());
  std::regex re("POST /v1/completions [^\"]*\" 200 .* upstream=(127\\.0\\.0\\.1:[0-9]+) ");
  for (std::sregex_iterator it(log.begin(), log.end(), re), end; it != end; ++it)
    served.insert((*it)[1]);
  EXPECT_GE(served.size(), 2u) << log;
}

json post_to(int port, const json& body) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(120, 0);
  auto r = c.Post("/v1/completions", body.dump(), "application/json");
  EXPECT_TRUE(r && r->status == 200) << (r ? r->body : httplib::to_string(r.error()));
  return r && r->status == 200 ? json::parse(r->body) : json::object();
}

std::string metrics_of(int port) {
  auto r = httplib::Client("127.0.0.1", port).Get("/metrics");
  return r ? r->body : "";
}

double redis_metric(int port, const std::string& name) {
  return metric_value(metrics_of(port), name + "\\{tier=\"redis\"\\}");
}

TEST_F(Fleet, PrefixWarmedOnReplicaOneIsAHitOnReplicaTwoThroughRedis) {
  // Token ids, so the prompt is exactly 20 full blocks of 16 and a tail of 9.
  std::vector<int32_t> prompt;
  for (int i = 0; i < 329; ++i) prompt.push_back(20 + (i * 37) % 300);  // vocabulary: 401
  const json body = {{"prompt", prompt},
                     {"max_tokens", 6},
                     {"temperature", 0},
                     {"ignore_eos", true},
                     {"logprobs", 20},
                     {"cache_salt", "fleet-redis"},
                     {"return_tokens_as_token_ids", true}};
  const int one = replicas_[0]->port(), two = replicas_[1]->port();
  const json cold = post_to(one, body);
  ASSERT_TRUE(cold.contains("usage"));
  ASSERT_EQ(cold["usage"]["prompt_tokens_details"]["cached_tokens"], 0) << cold.dump();
  // Replica 1 writes to Redis off its engine thread: wait until its write queue is empty.
  for (int i = 0; i < 300; ++i) {
    const std::string m = metrics_of(one);
    if (metric_value(m, "invar_cache_tier_queue_bytes") == 0 &&
        redis_metric(one, "invar_cache_tier_writes_total") >= 20)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GE(redis_metric(one, "invar_cache_tier_writes_total"), 20) << metrics_of(one);
  const double hits_before = redis_metric(two, "invar_cache_tier_hits_total");
  const json warm = post_to(two, body);
  ASSERT_TRUE(warm.contains("usage"));
  EXPECT_EQ(warm["usage"]["prompt_tokens_details"]["cached_tokens"], 320) << warm.dump();
  EXPECT_GT(redis_metric(two, "invar_cache_tier_hits_total"), hits_before)
      << "replica 2 never saw this salt: its hit must come from Redis";
  EXPECT_EQ(warm["system_fingerprint"], cold["system_fingerprint"]);
  EXPECT_EQ(warm["choices"][0]["logprobs"].dump(), cold["choices"][0]["logprobs"].dump())
      << "the top-20 logprobs of the Redis hit differ from the cold run";
}

TEST_F(Fleet, KillingAReplicaMidStreamLosesNoLaterRequest) {
  const std::string tenant = "tenant-killed";
  // A long stream for the tenant; the replica that serves it is killed once tokens flow.
  std::promise<void> first_token;
  std::atomic<bool> signalled{false};
  std::string streamed;
  std::thread stream([&] {
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = completion_body(tenant, 3000, true).dump();
    req.set_header("Content-Type", "application/json");
    req.set_header("X-Cache-Salt", tenant);
    req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
      streamed.append(data, len);
      if (streamed.find("\"text\"") != std::string::npos && !signalled.exchange(true))
        first_token.set_value();
      return true;
    };
    nginx_client().send(req);
    if (!signalled.exchange(true)) first_token.set_value();
  });
  const bool flowing =
      first_token.get_future().wait_for(std::chrono::seconds(120)) == std::future_status::ready;
  // Tokens reached the client through nginx while the replica was still computing: the stream
  // passes through unbuffered.
  int victim = -1;
  for (int i = 0; flowing && i < kReplicas && victim < 0; ++i) {
    auto m = httplib::Client("127.0.0.1", replicas_[i]->port()).Get("/metrics");
    if (m && metric_value(m->body, "invar_server_inflight_requests") > 0) victim = i;
  }
  if (victim < 0) {
    stream.join();
    FAIL() << "no replica had the stream in flight:\n" << streamed.substr(0, 400);
  }
  const std::string victim_addr = "127.0.0.1:" + std::to_string(replicas_[victim]->port());
  replicas_[victim]->stop(SIGKILL, 30);
  stream.join();
  EXPECT_EQ(streamed.find("[DONE]"), std::string::npos) << "the stream was not cut mid-way";

  // Every later request succeeds, the killed tenant's included (whole and streamed).
  for (int n = 0; n < 12; ++n) {
    const std::string salt = n % 3 == 0 ? tenant : "tenant-" + std::to_string(n);
    const bool stream_it = n % 2 == 1;
    httplib::Headers h = {{"X-Cache-Salt", salt}, {"X-Request-Id", salt + "-" + std::to_string(n)}};
    auto r = nginx_client().Post("/v1/completions", h, completion_body(salt, 8, stream_it).dump(),
                                 "application/json");
    ASSERT_TRUE(r) << "request " << n << ": " << httplib::to_string(r.error());
    ASSERT_EQ(r->status, 200) << "request " << n << ": " << r->body << "\n" << nginx_->error_log();
    if (stream_it) {
      EXPECT_NE(r->body.find("data: [DONE]"), std::string::npos) << r->body;
    } else {
      EXPECT_EQ(json::parse(r->body)["usage"]["completion_tokens"], 8) << r->body;
    }
  }
  // The condition happened: the tenant hashed to the killed replica, and nginx moved a later
  // request of that tenant from the refused connection to the next replica.
  bool moved = false;
  for (const auto& ups : upstreams_of(tenant))
    if (ups.rfind(victim_addr + ", ", 0) == 0) moved = true;
  EXPECT_TRUE(moved) << "no request was retried away from " << victim_addr << ":\n"
                     << nginx_->access_log();
}

}  // namespace
