// Three real `invar serve` replicas (tiny reference model) behind a real nginx on loopback,
// configured by deploy/nginx/render-nginx-conf: the probe through nginx reports stable while
// requests spread over the replicas, and killing the replica that serves a stream loses no
// later request (nginx retries the refused connection on the next replica).
#include <gtest/gtest.h>
#include <httplib.h>

#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

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
    std::vector<std::string> upstreams;
    for (int i = 0; i < kReplicas; ++i) {
      replicas_[i] = new ServeProcess(
          {"--model", kTinyModel, "--threads", "1", "--block-size", "16", "--ctx", "4096"},
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
    fs::remove_all(*dir_);
    delete dir_;
  }
  void SetUp() override {
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
    std::regex line_re("request_id=" + label + "[^ ]* upstream=([^ ]+(?:, [^ ]+)*) upstream_status");
    std::string log = nginx_->access_log();
    for (std::sregex_iterator it(log.begin(), log.end(), line_re), end; it != end; ++it)
      out.push_back((*it)[1]);
    return out;
  }

  static fs::path* dir_;
  static ServeProcess* replicas_[kReplicas];
  static NginxProcess* nginx_;
};

fs::path* Fleet::dir_ = nullptr;
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
  ASSERT_EQ(first_token.get_future().wait_for(std::chrono::seconds(120)),
            std::future_status::ready);
  int victim = -1;
  for (int i = 0; i < kReplicas && victim < 0; ++i) {
    auto m = httplib::Client("127.0.0.1", replicas_[i]->port()).Get("/metrics");
    if (m && metric_value(m->body, "invar_server_inflight_requests") > 0) victim = i;
  }
  if (victim < 0) stream.join();
  ASSERT_GE(victim, 0) << "no replica had the stream in flight:\n" << streamed.substr(0, 400);
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
