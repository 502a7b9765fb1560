// Bounded pre-admission work: structural limits refuse what cannot fit before anything is
// rendered or tokenised; bodies over 64 KiB are prepared on the low-priority pool, so neither
// the IO threads nor small requests wait for them; the pool's queue is bounded (429), a
// request's preparation CPU is bounded (400), and /ready (or /health?ready) says when the
// server is saturated. A constrained request is prepared (its grammar compiled) on the pool
// whatever its size.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "fake_server.h"
#include "grammar/compile.h"
#include "http_test_util.h"

namespace prepare_test {

using namespace invar::server;
using namespace invar::server::testing;
using json = nlohmann::json;

namespace {

TEST(Prepare, StructuralLimitsComeBeforeRenderingAndTokenising) {
  FakeServer s;  // n_ctx 256, one byte a token: at most 256 bytes of text
  const int64_t encodes = s.fake->encodes;
  const json msgs = json::array({{{"role", "user"}, {"content", std::string(300, 'a')}}});
  json many = json::array();
  for (int i = 0; i < 300; ++i) many.push_back({{"role", "user"}, {"content", ""}});
  const json tools =
      json::array({{{"type", "function"},
                    {"function", {{"name", "f"}, {"description", std::string(300, 'd')}}}}});
  const std::vector<std::tuple<std::string, json, std::string>> cases = {
      {"/v1/chat/completions", {{"messages", many}}, "messages"},
      {"/v1/chat/completions", {{"messages", msgs}}, "messages"},
      {"/v1/chat/completions",
       {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"tools", tools}},
       "tools"},
      {"/v1/completions", {{"prompt", std::string(300, 'p')}}, "prompt"},
      {"/v1/completions", {{"prompt", json::array({std::string(300, 'p')})}}, "prompt"},
      {"/v1/completions", {{"prompt", json(std::vector<int>(300, 1))}}, "prompt"},
      {"/tokenize", {{"prompt", std::string(300, 'p')}}, "prompt"},
      {"/tokenize", {{"messages", many}}, "messages"},
  };
  for (const auto& [path, body, param] : cases) {
    auto r = s.post(path, body.dump());
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << path << " " << r->body;
    EXPECT_EQ(body_of(r)["error"]["param"], param) << r->body;
    EXPECT_NE(r->body.find("context of 256 tokens"), std::string::npos) << r->body;
  }
  EXPECT_EQ(s.fake->encodes, encodes) << "something was rendered or tokenised first";
  // An image's URL is not message text (its tokens are counted from its header): a data URL
  // longer than the text bound passes these limits (and meets the fake's missing tower).
  for (const json& part :
       {json{{"type", "image_url"},
             {"image_url", {{"url", "data:image/png;base64," + std::string(300, 'A')}}}},
        json{{"type", "input_image"},
             {"image_url", "data:image/png;base64," + std::string(300, 'A')}}}) {
    const json body = {
        {"messages", json::array({{{"role", "user"}, {"content", json::array({part})}}})}};
    auto r = s.post("/v1/chat/completions", body.dump());
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_NE(r->body.find("no vision tower"), std::string::npos) << r->body;
  }
  // truncate_prompt_tokens keeps the last tokens of a longer prompt: its text is not bounded.
  auto t = s.post(
      "/v1/completions",
      json{{"prompt", std::string(300, 'p')}, {"truncate_prompt_tokens", 10}, {"max_tokens", 1}}
          .dump());
  EXPECT_EQ(t->status, 200) << t->body;
}

// Two large bodies whose tokenisation is held on a gate until the test opens it: on the IO
// threads (two of them) they would hold every connection; on the pool a small request is
// answered meanwhile, while both are still held.
TEST(Prepare, LargeBodiesLeaveTheIoThreadsFree) {
  std::promise<void> open;
  FakeServer s({}, false, [gate = open.get_future().share()](FakeBackend& f) {
    f.ctx = 1 << 20;
    f.big_encode_gate = gate;
  });
  const json big = {{"prompt", std::string(100000, 'b')}, {"max_tokens", 1}};
  std::vector<int> statuses(2);
  std::atomic<int> big_done{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 2; ++i)
    ts.emplace_back([&, i] {
      statuses[i] = s.post("/v1/completions", big.dump())->status;
      ++big_done;
    });
  while (s.fake->encodes < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // On the IO threads, these would wait for the gate until their clients time out.
  const auto small = s.post("/v1/completions", R"({"prompt":"a","max_tokens":2})");
  EXPECT_TRUE(small && small->status == 200) << "the small request waited for a large one";
  const auto health = s.get("/health");
  EXPECT_TRUE(health && health->status == 200) << "/health waited for a large request";
  EXPECT_EQ(big_done, 0) << "a large body's preparation ended before its gate opened";
  open.set_value();
  for (auto& t : ts) t.join();
  EXPECT_EQ(statuses, (std::vector<int>{200, 200}));
}

// A constraint sends its request to the pool whatever the body's size: a grammar of a few
// hundred bytes can take seconds to compile. Two small constrained requests are held in their
// preparation (the gate stands for such a compile) on both pool threads, and /health and a
// plain request are answered meanwhile. Prepared on the IO threads (two), they would hold
// every connection: /health would wait for the gate, and its client time out.
TEST(Prepare, ConstrainedRequestsLeaveTheIoThreadsFree) {
  ServerConfig cfg;
  cfg.prepare_threads = 2;
  std::promise<void> open;
  FakeServer s(cfg, false, [gate = open.get_future().share()](FakeBackend& f) {
    f.big_text = 100;
    f.big_encode_gate = gate;
  });
  const auto compiles = invar::grammar::compile_cache_stats().misses;
  std::vector<int> statuses(2);
  std::vector<std::thread> ts;
  for (int i = 0; i < 2; ++i)
    ts.emplace_back([&, i] {
      const json body = {{"prompt", std::string(200, 'p')},
                         {"max_tokens", 1},
                         {"guided_regex", "held-" + std::to_string(i) + "[a-z]{1,3}"}};
      auto r = s.post("/v1/completions", body.dump());
      statuses[i] = r ? r->status : -1;
    });
  while (s.fake->encodes < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto health = s.get("/health");
  const auto plain = s.post("/v1/completions", R"({"prompt":"a","max_tokens":2})");
  const auto ready = s.get("/ready");
  const auto during = invar::grammar::compile_cache_stats().misses;
  open.set_value();
  for (auto& t : ts) t.join();
  EXPECT_EQ(health ? health->status : -1, 200);
  EXPECT_EQ(plain ? plain->status : -1, 200);
  ASSERT_TRUE(ready);
  EXPECT_EQ(body_of(ready)["preparing"], 0) << "both run on the pool, none waits: " << ready->body;
  EXPECT_EQ(during, compiles) << "answered while both constraints were still to compile";
  EXPECT_EQ(statuses, (std::vector<int>{200, 200}));
  EXPECT_EQ(invar::grammar::compile_cache_stats().misses - compiles, 2u);
}

TEST(Prepare, FullQueueIs429AndCpuBudgetIs400) {
  ServerConfig cfg;
  cfg.prepare_threads = 1;  // one request runs, one waits, the third is over the queue
  cfg.prepare_queue = 1;
  // The budget leaves room for what parsing and tokenising 100 kB costs under ThreadSanitizer
  // (~60 ms of CPU on the CI machine, 5-15x the release build's); the spin below is over it.
  cfg.prepare_cpu_s = 0.5;
  // The first request waits in its tokenisation on a gate (no CPU) until the third has been
  // refused: the order is observed (encodes, /ready's "preparing"), never slept for.
  std::promise<void> open;
  FakeServer s(cfg, false, [gate = open.get_future().share()](FakeBackend& f) {
    f.ctx = 1 << 20;
    f.big_encode_gate = gate;
  });
  const json big = {{"prompt", std::string(100000, 'b')}, {"max_tokens", 1}};
  std::vector<int> statuses(2, -1);
  std::vector<std::thread> ts;
  const auto post_in = [&](int i) {
    ts.emplace_back([&, i] {
      auto r = s.post("/v1/completions", big.dump());
      statuses[i] = r ? r->status : -1;
    });
  };
  post_in(0);
  while (s.fake->encodes < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  post_in(1);
  for (;;) {  // until the second waits in the preparation queue
    auto ready = s.get("/ready");
    ASSERT_TRUE(ready);
    if (body_of(ready).value("preparing", 0) >= 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  auto r = s.post("/v1/completions", big.dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429) << r->body;
  EXPECT_NE(r->body.find("--prepare-queue"), std::string::npos) << r->body;
  open.set_value();
  for (auto& t : ts) t.join();
  EXPECT_EQ(statuses, (std::vector<int>{200, 200})) << "waiting costs no CPU";

  s.fake->big_encode_cpu_s = 0.8;
  auto cpu = s.post("/v1/completions", big.dump());
  ASSERT_TRUE(cpu);
  EXPECT_EQ(cpu->status, 400) << cpu->body;
  EXPECT_NE(cpu->body.find("--prepare-cpu-seconds"), std::string::npos) << cpu->body;
  auto tok = s.post("/tokenize", json{{"prompt", std::string(100000, 'b')}}.dump());
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->status, 400);
}

TEST(Prepare, ReadySaysWhenTheQueueIsSaturated) {
  ServerConfig cfg;
  cfg.queue_limit = 1;
  FakeServer s(cfg);
  EXPECT_EQ(s.get("/ready")->status, 200);
  EXPECT_EQ(s.get("/health?ready")->status, 200);
  s.fake->hold = true;
  std::thread held([&] { s.post("/v1/completions", R"({"prompt":"a","max_tokens":2})"); });
  while (s.fake->submits < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto r = s.get("/ready");
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(body_of(r)["status"], "saturated") << r->body;
  EXPECT_EQ(body_of(r)["inflight"], 1);
  EXPECT_EQ(s.get("/health?ready")->status, 503);
  EXPECT_EQ(s.get("/health")->status, 200) << "liveness stays up";
  s.fake->hold = false;
  held.join();
  // The client has its response a moment before the server's handler returns and the request
  // leaves the in-flight count: readiness comes back within that moment, not necessarily at once.
  int ready = 0;
  for (int i = 0; i < 2000 && ready != 200; ++i) {
    ready = s.get("/ready")->status;
    if (ready != 200) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(ready, 200);
}

}  // namespace

}  // namespace prepare_test
