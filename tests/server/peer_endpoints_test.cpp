// The peers' habits over the scripted backend: /tokenize and /detokenize in vLLM's and
// llama-server's shapes (and at /v1/...), llama-server's /props, vLLM's /version, the
// random-weight demo model said in /v1/models, and /metrics in vLLM's names beside invar's.
#include <gtest/gtest.h>

#include "fake_server.h"
#include "http_test_util.h"

namespace peer_endpoints_test {

using namespace invar::server;
using namespace invar::server::testing;
using json = nlohmann::json;

namespace {

// Every answer of these endpoints is a JSON body, said so in its Content-Type.
json body_of(const httplib::Result& r) {
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json") << r->body;
  return json::parse(r->body);
}

TEST(PeerEndpoints, TokenizeInBothDialects) {
  FakeServer s;
  for (const char* path : {"/tokenize", "/v1/tokenize"}) {
    // llama-server: {"content"} → {"tokens"}.
    auto r = s.post(path, R"({"content":"ab"})");
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(body_of(r), json::parse(R"({"tokens":[97,98]})")) << path;
    // with_pieces: text when whole UTF-8, else the bytes (é is two byte tokens here).
    r = s.post(path, R"({"content":"a\u00e9","with_pieces":true,"add_special":true})");
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(body_of(r), json::parse(R"({"tokens":[{"id":97,"piece":"a"},)"
                                      R"({"id":195,"piece":[195]},{"id":169,"piece":[169]}]})"));
    // vLLM: {"prompt"} → {"count", "max_model_len", "tokens"}.
    r = s.post(path, R"({"prompt":"ab","model":"fake-model"})");
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(body_of(r), json::parse(R"({"count":2,"max_model_len":256,"tokens":[97,98]})"));
  }
  // parse_special false is the plain encoding (the same bytes for this vocabulary).
  EXPECT_EQ(body_of(s.post("/tokenize", R"({"content":"ab","parse_special":false})"))["tokens"],
            json::parse("[97,98]"));
  // Refusals name the field.
  auto bad = s.post("/tokenize", R"({"content":"a","return_token_strs":true})");
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(body_of(bad)["error"]["param"], "return_token_strs") << bad->body;
  bad = s.post("/tokenize", R"({"content":"a","prompt":"b"})");
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(body_of(bad)["error"]["param"], "content") << bad->body;
  bad = s.post("/tokenize", R"({"content":7})");
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(body_of(bad)["error"]["param"], "content") << bad->body;
  bad = s.post("/tokenize", R"({"content":"a","with_pieces":"yes"})");
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(body_of(bad)["error"]["param"], "with_pieces") << bad->body;
  EXPECT_EQ(s.post("/tokenize", R"({"content":"a","model":"other"})")->status, 404);
}

TEST(PeerEndpoints, DetokenizeAnswersInTheRequestsDialect) {
  FakeServer s;
  for (const char* path : {"/detokenize", "/v1/detokenize"}) {
    // llama-server's request names no model: {"content"}.
    auto r = s.post(path, R"({"tokens":[104,105]})");
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(body_of(r), json::parse(R"({"content":"hi"})")) << path;
    // vLLM's names the model: {"prompt"}.
    r = s.post(path, R"({"tokens":[104,105],"model":"fake-model"})");
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(body_of(r), json::parse(R"({"prompt":"hi"})")) << path;
  }
  EXPECT_EQ(s.post("/detokenize", R"({"tokens":[300]})")->status, 400);
  EXPECT_EQ(s.get("/v1/tokenize")->status, 405);
}

TEST(PeerEndpoints, PropsAndVersion) {
  ServerConfig cfg;
  cfg.model_path = "/models/fake.gguf";
  cfg.total_slots = 3;
  cfg.version = "9.9.9";
  cfg.build_info = "invar 9.9.9; numerics: x";
  cfg.api_key = "k";
  FakeServer s(cfg);
  EXPECT_EQ(s.get("/props")->status, 401) << "/props shows the model path and template: guarded";
  auto r = s.get("/props", {{"Authorization", "Bearer k"}});
  ASSERT_EQ(r->status, 200) << r->body;
  const json p = body_of(r);
  EXPECT_EQ(p["default_generation_settings"]["n_ctx"], 256);
  EXPECT_EQ(p["default_generation_settings"]["speculative"], false);
  EXPECT_EQ(p["default_generation_settings"]["params"]["temperature"], 1.0);
  EXPECT_EQ(p["default_generation_settings"]["params"]["top_p"], 1.0);
  EXPECT_EQ(p["total_slots"], 3);
  EXPECT_EQ(p["model_path"], "/models/fake.gguf");
  EXPECT_NE(p["chat_template"].get<std::string>().find("{% for m in messages %}"),
            std::string::npos)
      << p["chat_template"];
  EXPECT_EQ(p["build_info"], "invar 9.9.9; numerics: x");
  EXPECT_EQ(p["modalities"]["vision"], false);
  EXPECT_FALSE(p.contains("random_weights")) << "only the demo model says so";
  EXPECT_EQ(s.post("/props", "{}", {{"Authorization", "Bearer k"}})->status, 405);
  // /version is open, as vLLM's and /health are.
  r = s.get("/version");
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(body_of(r), json::parse(R"({"version":"9.9.9"})"));
}

TEST(PeerEndpoints, RandomWeightsAreSaidInModelsAndProps) {
  ServerConfig cfg;
  cfg.random_weights = true;
  FakeServer demo(cfg);
  const json m = body_of(demo.get("/v1/models"))["data"][0];
  EXPECT_EQ(m["random_weights"], true);
  EXPECT_NE(m["warning"].get<std::string>().find("random-weight"), std::string::npos) << m;
  EXPECT_EQ(body_of(demo.get("/v1/models/fake-model"))["random_weights"], true);
  EXPECT_EQ(body_of(demo.get("/props"))["random_weights"], true);
  FakeServer real;
  EXPECT_FALSE(body_of(real.get("/v1/models"))["data"][0].contains("random_weights"));
}

TEST(PeerEndpoints, MetricsInVllmNamesBesideInvars) {
  ServerConfig cfg;
  cfg.served_model_names = {"served \"x\""};
  FakeServer s(cfg);
  ASSERT_EQ(s.post("/v1/completions", R"({"prompt":"abc","max_tokens":4})")->status, 200);
  std::string m;
  for (int i = 0; i < 200; ++i) {  // the request's histograms are observed by then; wait anyway
    m = s.get("/metrics")->body;
    if (m.find("vllm:e2e_request_latency_seconds_count{") != std::string::npos) break;
  }
  const std::string l = "{model_name=\"served \\\"x\\\"\",engine=\"0\"}";
  for (const std::string& line : std::vector<std::string>{
           "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running" + l + " 0\n",
           "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting" + l + " 0\n",
           // The fake counts no tokens: the values are compared with invar's on the real server
           // (server_habits_test).
           "# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total" + l + " 0\n",
           "# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total" + l + " ",
           "# TYPE vllm:prefix_cache_queries_total counter\nvllm:prefix_cache_queries_total" + l +
               " 0\n",
           "# TYPE vllm:prefix_cache_hits_total counter\nvllm:prefix_cache_hits_total" + l + " 0\n",
           std::string("# TYPE vllm:time_to_first_token_seconds histogram\n"),
           "vllm:time_to_first_token_seconds_bucket{model_name=\"served \\\"x\\\"\",engine=\"0\","
           "le=\"2560.0\"} 1\n",
           "vllm:time_to_first_token_seconds_count" + l + " 1\n",
           "vllm:inter_token_latency_seconds_count" + l + " 3\n",
           "vllm:time_per_output_token_seconds_count" + l + " 3\n",
           "vllm:e2e_request_latency_seconds_count" + l + " 1\n",
           // invar's own families are unchanged beside them.
           std::string("invar_time_to_first_token_seconds_bucket{le=\"30\"} 1\n")})
    EXPECT_NE(m.find(line), std::string::npos) << line << "\n" << m;
}

}  // namespace

}  // namespace peer_endpoints_test
