// A request is one unit however many choices it asks for: one admission slot, one prompt
// tokenisation, one prompt-logprobs computation (choice 0's, repeated in every choice), one
// group in the engine; and its whole work is bounded (--max-request-tokens,
// --max-request-logprobs) with a 400 naming the fields. Who asks (client key) and vLLM's
// priority reach the engine as plain fields.
#include <gtest/gtest.h>

#include <thread>

#include "fake_server.h"
#include "http_test_util.h"

namespace request_budget_test {

using namespace invar::server;
using namespace invar::server::testing;
using json = nlohmann::json;

namespace {

TEST(RequestBudget, NChoicesAreOneAdmissionUnit) {
  ServerConfig cfg;
  cfg.queue_limit = 2;
  FakeServer s(cfg);
  s.fake->hold = true;
  std::vector<int> statuses(2);
  std::thread many([&] {
    statuses[0] = s.post("/v1/completions", R"({"prompt":"a","max_tokens":2,"n":8})")->status;
  });
  while (s.fake->submits < 8) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::thread one(
      [&] { statuses[1] = s.post("/v1/completions", R"({"prompt":"a","max_tokens":2})")->status; });
  while (s.fake->submits < 9) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto r = s.post("/v1/completions", R"({"prompt":"a","max_tokens":2})");
  EXPECT_EQ(r->status, 429) << "two requests are in flight, whatever their choices";
  s.fake->hold = false;
  many.join();
  one.join();
  EXPECT_EQ(statuses, (std::vector<int>{200, 200}));
}

TEST(RequestBudget, OverTheCapIs400NamingTheFieldsAndTheCap) {
  ServerConfig cfg;
  cfg.max_request_tokens = 100;
  cfg.max_request_logprobs = 50;
  FakeServer s(cfg);
  auto r = s.post("/v1/completions", R"({"prompt":"abc","max_tokens":20,"n":5})");
  ASSERT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(body_of(r)["error"]["param"], "n");
  const std::string m = body_of(r)["error"]["message"];
  EXPECT_NE(m.find("n × (prompt + max_tokens) = 5 × (3 + 20) = 115"), std::string::npos) << m;
  EXPECT_NE(m.find("limit of 100 (--max-request-tokens)"), std::string::npos) << m;
  EXPECT_EQ(s.fake->submits, 0) << "refused before the engine saw it";
  EXPECT_EQ(s.post("/v1/completions", R"({"prompt":"abc","max_tokens":17,"n":5})")->status, 200);

  auto lp = s.post("/v1/completions", R"({"prompt":"abc","max_tokens":10,"n":2,"logprobs":5})");
  ASSERT_EQ(lp->status, 400) << lp->body;
  EXPECT_EQ(body_of(lp)["error"]["param"], "logprobs");
  EXPECT_NE(lp->body.find("= 100 logprob candidates"), std::string::npos) << lp->body;
  EXPECT_NE(lp->body.find("--max-request-logprobs"), std::string::npos) << lp->body;
  auto plp =
      s.post("/v1/completions", R"({"prompt":"abcdefghij","max_tokens":1,"prompt_logprobs":6})");
  ASSERT_EQ(plp->status, 400) << plp->body;
  EXPECT_EQ(body_of(plp)["error"]["param"], "prompt_logprobs");
  auto chat = s.post("/v1/chat/completions",
                     R"({"messages":[{"role":"user","content":"hi"}],"n":2,"max_tokens":40,)"
                     R"("logprobs":true,"top_logprobs":1})");
  ASSERT_EQ(chat->status, 400) << chat->body;
  EXPECT_EQ(body_of(chat)["error"]["param"], "n");

  // The default follows the model: n_ctx (256) × max_running (64) / 4 = 4096 tokens.
  FakeServer d;
  EXPECT_EQ(d.post("/v1/completions", R"({"prompt":"a","max_tokens":31,"n":128})")->status, 200);
  auto over = d.post("/v1/completions", R"({"prompt":"a","max_tokens":32,"n":128})");
  EXPECT_EQ(over->status, 400);
  EXPECT_NE(over->body.find("limit of 4096"), std::string::npos) << over->body;
}

TEST(RequestBudget, ChoicesShareOnePromptAndItsLogprobs) {
  FakeServer s;
  const std::string req =
      R"({"prompt":"abcd","max_tokens":2,"n":3,"prompt_logprobs":1,"echo":true,"logprobs":1,)"
      R"("temperature":1})";
  for (bool stream : {false, true}) {
    const int64_t encodes = s.fake->encodes;
    const size_t submitted = s.fake->submitted().size();
    json body = json::parse(req);
    body["stream"] = stream;
    auto r = s.post("/v1/completions", body.dump());
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(s.fake->encodes - encodes, 1) << "the prompt was tokenised once per choice";
    const auto sub = s.fake->submitted();
    ASSERT_EQ(sub.size(), submitted + 3);
    EXPECT_EQ(sub[submitted].prompt_logprobs, 1) << "choice 0 computes them";
    EXPECT_EQ(sub[submitted + 1].prompt_logprobs, std::nullopt);
    EXPECT_EQ(sub[submitted + 2].prompt_logprobs, std::nullopt);
    // Every choice carries them, equal.
    std::vector<json> plp(3), echo_lp(3);
    if (!stream) {
      const json whole = body_of(r);
      for (const json& c : whole["choices"]) {
        const size_t i = c["index"];
        plp[i] = c["prompt_logprobs"];
        echo_lp[i] = c["logprobs"]["token_logprobs"];
        echo_lp[i].erase(echo_lp[i].end() - 2, echo_lp[i].end());  // the generated two
      }
    } else {
      for (const std::string& d : sse_data(r->body)) {
        if (d == "[DONE]") continue;
        const json c = json::parse(d);
        for (const json& ch : c["choices"])
          if (ch.contains("prompt_logprobs"))
            plp[ch["index"].get<size_t>()] = ch["prompt_logprobs"];
      }
    }
    ASSERT_FALSE(plp[0].is_null()) << r->body;
    EXPECT_EQ(plp[0].size(), 4u);
    EXPECT_EQ(plp[1], plp[0]) << (stream ? "stream" : "whole");
    EXPECT_EQ(plp[2], plp[0]) << (stream ? "stream" : "whole");
    if (!stream) {
      EXPECT_EQ(echo_lp[1], echo_lp[0]);
      EXPECT_EQ(echo_lp[2], echo_lp[0]);
    }
  }
}

TEST(RequestBudget, ClientKeyAndPriorityReachTheEngine) {
  FakeServer s;
  ASSERT_EQ(s.post("/v1/completions", R"({"prompt":"a","max_tokens":1,"priority":-3})")->status,
            200);
  EXPECT_EQ(s.fake->submitted().back().priority, -3);
  EXPECT_EQ(s.fake->submitted().back().client_key, "peer:127.0.0.1");
  auto bad = s.post("/v1/completions", R"({"prompt":"a","priority":"high"})");
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(body_of(bad)["error"]["param"], "priority");

  ServerConfig cfg;
  cfg.api_key = "sekret";
  FakeServer k(cfg);
  ASSERT_EQ(k.post("/v1/completions", R"({"prompt":"a","max_tokens":1})",
                   {{"Authorization", "Bearer sekret"}})
                ->status,
            200);
  const std::string key = k.fake->submitted().back().client_key;
  EXPECT_EQ(key, "tenant:default") << "the client is the key's tenant";
  EXPECT_EQ(key.find("sekret"), std::string::npos) << "the key itself reached the engine";
  EXPECT_EQ(k.fake->submitted().back().cache_salt.find("sekret"), std::string::npos);
}

}  // namespace

}  // namespace request_budget_test
