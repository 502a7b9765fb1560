// The HTTP layer end to end over a scripted backend: routes, statuses, auth, limits, loading,
// streaming shapes, stream = whole, UTF-8 in streams, stops, disconnect → cancel, drain.
#include <gtest/gtest.h>

#include <thread>

#include "core/utf8.h"
#include "fake_server.h"
#include "http_test_util.h"

namespace http_server_test {

using namespace invar::server;
using namespace invar::server::testing;
using json = nlohmann::json;

namespace {

// Text and (token, logprob) pairs of a stream, concatenated.
struct Streamed {
  std::string text;
  std::vector<json> logprob_entries;
  std::string finish;
  json usage;
  bool done = false;
  std::vector<json> chunks;
};

Streamed parse_stream(const std::string& body, bool chat) {
  Streamed s;
  for (auto& d : sse_data(body)) {
    if (d == "[DONE]") {
      s.done = true;
      continue;
    }
    json c = json::parse(d);
    s.chunks.push_back(c);
    if (!c["usage"].is_null()) s.usage = c["usage"];
    if (c["choices"].empty()) continue;
    const json& ch = c["choices"][0];
    if (chat)
      s.text += ch["delta"].value("content", "");
    else
      s.text += ch["text"].get<std::string>();
    if (!ch["finish_reason"].is_null()) s.finish = ch["finish_reason"];
    if (ch["logprobs"].is_object()) {
      if (chat) {
        for (auto& e : ch["logprobs"]["content"]) s.logprob_entries.push_back(e);
      } else {
        auto& lp = ch["logprobs"];
        for (size_t i = 0; i < lp["tokens"].size(); ++i)
          s.logprob_entries.push_back({lp["tokens"][i], lp["token_logprobs"][i],
                                       lp["top_logprobs"][i], lp["text_offset"][i]});
      }
    }
  }
  return s;
}

}  // namespace

TEST(HttpServer, LoadingAnswers503ThenServes) {
  FakeServer s({}, /*gated=*/true);
  auto h = s.get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 503);
  EXPECT_EQ(body_of(h)["status"], "loading");
  auto c = s.post("/v1/completions", R"({"prompt":"a"})");
  EXPECT_EQ(c->status, 503);
  EXPECT_NE(c->body.find("loading"), std::string::npos);
  s.release.set_value();
  ASSERT_TRUE(s.server->wait_loaded(nullptr));
  EXPECT_EQ(s.get("/health")->status, 200);
  EXPECT_EQ(s.post("/v1/completions", R"({"prompt":"a"})")->status, 200);
}

TEST(HttpServer, CompletionShape) {
  FakeServer s;
  auto r = s.post("/v1/completions",
                  R"({"model":"fake-model","prompt":"hello","max_tokens":5,"temperature":0})");
  ASSERT_EQ(r->status, 200) << r->body;
  json b = body_of(r);
  EXPECT_EQ(b["object"], "text_completion");
  EXPECT_EQ(b["system_fingerprint"], "fp_fake");
  EXPECT_EQ(b["choices"][0]["text"].get<std::string>().size(), 5u);
  EXPECT_EQ(b["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(b["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(b["usage"]["completion_tokens"], 5);
  EXPECT_EQ(b["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  auto g = s.fake->submitted().back();
  EXPECT_EQ(g.max_tokens, 5);
  EXPECT_EQ(g.sampling.temperature, 0.0f);
  EXPECT_EQ(g.stop_tokens, std::vector<int32_t>{FakeBackend::kEos});
  auto m = s.get("/v1/models");
  EXPECT_EQ(body_of(m)["data"][0]["id"], "fake-model");
}

// min_tokens (vLLM's) reaches the engine request from chat and completions alike, and one
// above max_tokens (sent, or the endpoint's default) is a 400 in one wording for both.
TEST(HttpServer, MinTokensReachesTheEngineFromBothEndpoints) {
  FakeServer s;
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    const bool chat = std::string(path) == "/v1/chat/completions";
    const std::string prompt =
        chat ? R"("messages":[{"role":"user","content":"hi"}])" : R"("prompt":"hello")";
    auto r = s.post(path, "{" + prompt + R"(,"max_tokens":5,"min_tokens":3})");
    ASSERT_EQ(r->status, 200) << path << ": " << r->body;
    EXPECT_EQ(s.fake->submitted().back().sampling.min_tokens, 3) << path;
    r = s.post(path, "{" + prompt + R"(,"max_tokens":5,"min_tokens":6})");
    EXPECT_EQ(r->status, 400) << path;
    EXPECT_EQ(body_of(r)["error"]["param"], "min_tokens") << r->body;
    EXPECT_EQ(body_of(r)["error"]["message"],
              "'min_tokens' must be at most 'max_tokens' (5), got 6")
        << path;
  }
  // Completions' default max_tokens is 16: the job's check, after the prompt is known.
  auto r = s.post("/v1/completions", R"({"prompt":"hello","min_tokens":17})");
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(body_of(r)["error"]["message"],
            "'min_tokens' must be at most 'max_tokens' (16), got 17");
}

TEST(HttpServer, StreamEqualsWholeBothShapes) {
  FakeServer s;
  for (bool chat : {false, true}) {
    std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
    std::string req =
        chat
            ? R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":12,"logprobs":true,"top_logprobs":3)"
            : R"({"prompt":"hi","max_tokens":12,"logprobs":3)";
    auto whole = s.post(path, req + "}");
    auto stream = s.post(path, req + R"(,"stream":true,"stream_options":{"include_usage":true}})");
    ASSERT_EQ(whole->status, 200);
    ASSERT_EQ(stream->status, 200);
    EXPECT_EQ(stream->get_header_value("Content-Type"), "text/event-stream");
    json w = body_of(whole);
    Streamed st = parse_stream(stream->body, chat);
    EXPECT_TRUE(st.done);
    const json& wc = w["choices"][0];
    EXPECT_EQ(st.text, chat ? wc["message"]["content"] : wc["text"]);
    EXPECT_EQ(st.finish, wc["finish_reason"]);
    EXPECT_EQ(st.usage, w["usage"]);
    ASSERT_EQ(st.logprob_entries.size(), 12u);
    for (size_t i = 0; i < 12; ++i) {
      if (chat) {
        EXPECT_EQ(st.logprob_entries[i], wc["logprobs"]["content"][i]);
        EXPECT_EQ(st.logprob_entries[i]["top_logprobs"].size(), 3u);
      } else {
        auto& lp = wc["logprobs"];
        json e = {lp["tokens"][i], lp["token_logprobs"][i], lp["top_logprobs"][i],
                  lp["text_offset"][i]};
        EXPECT_EQ(st.logprob_entries[i], e);
      }
    }
    if (chat) {
      EXPECT_EQ(st.chunks[0]["choices"][0]["delta"]["role"], "assistant");
    }
  }
}

TEST(HttpServer, StreamNeverSplitsUtf8) {
  // "é€😀" as single bytes.
  std::string text = "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
  FakeServer s({}, false, [&](FakeBackend& f) {
    for (unsigned char c : text) f.script.push_back(c);
  });
  auto r = s.post("/v1/completions", R"({"prompt":"x","max_tokens":9,"stream":true})");
  ASSERT_EQ(r->status, 200);
  Streamed st = parse_stream(r->body, false);
  EXPECT_EQ(st.text, text);
  int with_text = 0;
  for (auto& c : st.chunks) {
    std::string t = c["choices"][0]["text"];
    EXPECT_EQ(invar::utf8::lossy(t), t) << "a chunk carries a split character";
    with_text += !t.empty();
  }
  EXPECT_EQ(with_text, 3);  // one chunk per completed character
}

TEST(HttpServer, StopStringAndEndOfSequence) {
  FakeServer s({}, false, [](FakeBackend& f) {
    for (char c : std::string("abcENDxyz")) f.script.push_back(c);
  });
  auto r = s.post("/v1/completions", R"({"prompt":"x","max_tokens":9,"stop":"END"})");
  EXPECT_EQ(body_of(r)["choices"][0]["text"], "abc");
  EXPECT_EQ(body_of(r)["choices"][0]["finish_reason"], "stop");
  auto st = parse_stream(
      s.post("/v1/completions", R"({"prompt":"x","max_tokens":9,"stop":["END"],"stream":true})")
          ->body,
      false);
  EXPECT_EQ(st.text, "abc");
  EXPECT_EQ(st.finish, "stop");
  s.fake->script = {'a', 'b', FakeBackend::kEos, 'c'};
  auto e = body_of(
      s.post("/v1/chat/completions",
             R"({"messages":[{"role":"user","content":"q"}],"max_tokens":9,"logprobs":true})"));
  EXPECT_EQ(e["choices"][0]["message"]["content"], "ab");
  EXPECT_EQ(e["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(e["choices"][0]["logprobs"]["content"].size(), 2u) << "end-of-sequence is not output";
}

TEST(HttpServer, EchoWithPromptLogprobs) {
  FakeServer s;
  json b = body_of(
      s.post("/v1/completions", R"({"prompt":"abc","max_tokens":2,"echo":true,"logprobs":1})"));
  const json& lp = b["choices"][0]["logprobs"];
  EXPECT_EQ(b["choices"][0]["text"].get<std::string>().substr(0, 3), "abc");
  ASSERT_EQ(lp["tokens"].size(), 5u);
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_EQ(lp["token_logprobs"][1].get<double>(), double(FakeBackend::logprob_of('b')));
  EXPECT_EQ(lp["text_offset"], json::array({0, 1, 2, 3, 4}));
  EXPECT_EQ(s.fake->submitted().back().prompt_logprobs, 1);
}

TEST(HttpServer, Auth) {
  ServerConfig cfg;
  cfg.api_key = "sekret";
  FakeServer s(cfg);
  std::string req = R"({"prompt":"a","max_tokens":1})";
  auto none = s.post("/v1/completions", req);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(body_of(none)["error"]["type"], "authentication_error");
  EXPECT_EQ(s.post("/v1/completions", req, {{"Authorization", "Bearer wrong"}})->status, 401);
  EXPECT_EQ(s.get("/v1/models")->status, 401);
  EXPECT_EQ(s.post("/v1/completions", req, {{"Authorization", "Bearer sekret"}})->status, 200);
  EXPECT_EQ(s.get("/health")->status, 200);  // health stays open for probes
  // Only the whole key, exactly: no prefix, extension, trailing junk or other case.
  for (const char* v : {"Bearer sekre", "Bearer sekretX", "Bearer sekret ", "Bearer  sekret",
                        "bearer sekret", "Bearer sekret\t", "sekret", "Bearer", ""})
    EXPECT_EQ(status_of(raw_post(s.port, "/v1/completions", req,
                                 std::string("Authorization: ") + v + "\r\n")),
              401)
        << "'" << v << "'";
  const char nul[] = "Authorization: Bearer sekret\0junk\r\n";
  EXPECT_EQ(status_of(raw_post(s.port, "/v1/completions", req, std::string(nul, sizeof nul - 1))),
            400);
  EXPECT_EQ(status_of(raw_post(s.port, "/v1/completions", req,
                               "Authorization: Bearer sekret\r\nAuthorization: Bearer wrong\r\n")),
            401)
      << "two keys";
  EXPECT_EQ(status_of(raw_post(s.port, "/v1/completions", req, "Authorization: Bearer sekret\r\n")),
            200);
  EXPECT_EQ(s.get("/metrics")->status, 401);
  EXPECT_EQ(s.get("/metrics", {{"Authorization", "Bearer sekret"}})->status, 200);
  cfg.metrics_public = true;
  FakeServer open(cfg);
  EXPECT_EQ(open.get("/metrics")->status, 200);
  EXPECT_EQ(open.get("/v1/models")->status, 401);
}

TEST(HttpServer, NotFoundTooLargeContext) {
  ServerConfig cfg;
  cfg.max_body_bytes = 1000;
  FakeServer s(cfg);
  auto r = s.get("/v2/nothing");
  EXPECT_EQ(r->status, 404);
  EXPECT_NE(body_of(r)["error"]["message"].get<std::string>().find("/v2/nothing"),
            std::string::npos);
  auto m = s.post("/v1/completions", R"({"model":"gpt-9","prompt":"a"})");
  EXPECT_EQ(m->status, 404);
  EXPECT_EQ(body_of(m)["error"]["code"], "model_not_found");
  EXPECT_EQ(s.get("/v1/models/gpt-9")->status, 404);
  auto big = s.post("/v1/completions", R"({"prompt":")" + std::string(2000, 'a') + "\"}");
  EXPECT_EQ(big->status, 413);
  EXPECT_NE(big->body.find("1000 bytes"), std::string::npos) << big->body;
  auto ctx = s.post("/v1/completions", R"({"prompt":"abcd","max_tokens":253})");
  EXPECT_EQ(ctx->status, 400);
  EXPECT_EQ(body_of(ctx)["error"]["param"], "max_tokens");
  EXPECT_NE(ctx->body.find("maximum context length is 256"), std::string::npos) << ctx->body;
  EXPECT_EQ(s.post("/v1/completions", R"({"prompt":"abcd","max_tokens":252})")->status, 200);
  auto ids = s.post("/v1/completions", R"({"prompt":[1,999]})");
  EXPECT_EQ(ids->status, 400);
  EXPECT_NE(ids->body.find("prompt[1]"), std::string::npos);
}

TEST(HttpServer, QueueLimitGives429) {
  ServerConfig cfg;
  cfg.queue_limit = 2;
  FakeServer s(cfg);
  s.fake->hold = true;
  std::vector<std::thread> held;
  std::vector<int> statuses(2);
  for (int i = 0; i < 2; ++i)
    held.emplace_back([&, i] {
      statuses[i] = s.post("/v1/completions", R"({"prompt":"a","max_tokens":2})")->status;
    });
  while (s.fake->submits < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto r = s.post("/v1/completions", R"({"prompt":"a","max_tokens":2})");
  EXPECT_EQ(r->status, 429);
  EXPECT_NE(r->body.find("queue limit of 2"), std::string::npos);
  s.fake->hold = false;
  for (auto& t : held) t.join();
  EXPECT_EQ(statuses, (std::vector<int>{200, 200}));
  EXPECT_EQ(s.post("/v1/completions", R"({"prompt":"a","max_tokens":2})")->status, 200);
}

TEST(HttpServer, DisconnectCancelsAndFreesBlocks) {
  FakeServer s({}, false, [](FakeBackend& f) { f.token_delay = std::chrono::milliseconds(5); });
  int fd = connect_local(s.port);
  ASSERT_GE(fd, 0);
  std::string body = R"({"prompt":"abc","max_tokens":200,"stream":true})";
  send_all(fd,
           "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           "Content-Length: " +
               std::to_string(body.size()) + "\r\n\r\n" + body);
  char buf[512];
  ASSERT_GT(::recv(fd, buf, sizeof buf, 0), 0);  // the stream has started
  ASSERT_EQ(s.fake->active(), 1);
  auto m = s.get("/metrics")->body;
  EXPECT_NE(m.find("invar_cache_referenced_blocks 1\n"), std::string::npos)
      << "blocks held mid-stream";
  ::close(fd);
  for (int i = 0; i < 400 && s.fake->active() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(s.fake->active(), 0) << "the request kept running after its client left";
  EXPECT_GE(s.fake->cancels.load(), 1);
  m = s.get("/metrics")->body;
  EXPECT_NE(m.find("invar_cache_referenced_blocks 0\n"), std::string::npos) << m;
  EXPECT_NE(m.find("invar_requests_cancelled_total 1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("invar_server_inflight_requests 0\n"), std::string::npos) << m;
}

TEST(HttpServer, MetricsExposition) {
  FakeServer s;
  s.post("/v1/completions", R"({"prompt":"a","max_tokens":3})");
  s.post("/v1/completions", R"({"prompt":5})");
  // Responses are counted just after they are written: let the count catch up.
  std::string m;
  for (int i = 0; i < 200 && m.find("status=\"400\"") == std::string::npos; ++i) {
    auto r = s.get("/metrics");
    EXPECT_EQ(r->status, 200);
    m = r->body;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (const char* line :
       {"# TYPE invar_time_to_first_token_seconds histogram",
        "invar_time_to_first_token_seconds_count 1", "invar_inter_token_latency_seconds_count 2",
        "invar_time_to_first_token_seconds_bucket{le=\"+Inf\"} 1", "invar_queue_depth ",
        "invar_cache_hit_rate ", "invar_cache_resident_bytes ", "invar_cache_evictions_total ",
        "invar_requests_total 1",
        "invar_http_responses_total{endpoint=\"/v1/completions\",status=\"400\"} 1",
        "invar_server_state{state=\"ready\"} 1"})
    EXPECT_NE(m.find(line), std::string::npos) << line;
}

TEST(HttpServer, DrainFinishesStreamsThenStops) {
  FakeServer s({}, false, [](FakeBackend& f) { f.token_delay = std::chrono::milliseconds(2); });
  std::string got;
  std::thread t([&] {
    got = s.post("/v1/completions", R"({"prompt":"a","max_tokens":50,"stream":true})")->body;
  });
  while (s.fake->active() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  s.server->shutdown(5);
  t.join();
  EXPECT_EQ(s.server->state(), "stopped");
  Streamed st = parse_stream(got, false);
  EXPECT_TRUE(st.done);
  EXPECT_EQ(st.text.size(), 50u) << "drain cut an in-flight stream";
  EXPECT_LT(connect_local(s.port), 0) << "still listening after shutdown";
}

// The engine may release a finished request's event sink (and the connection's waker in it)
// after the transport has stopped and its io_context is gone: releasing it then must touch
// nothing of the transport's (AddressSanitizer reports the use after free this guards).
TEST(HttpServer, SinkReleasedAfterShutdownTouchesNoTransportState) {
  FakeServer s({}, false, [](FakeBackend& f) { f.keep_sinks = true; });
  auto r = s.post("/v1/completions", R"({"prompt":"a","max_tokens":3})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  auto r2 = s.post("/v1/completions", R"({"prompt":"b","max_tokens":3,"stream":true})");
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->status, 200);
  s.server->shutdown(5);
  ASSERT_EQ(s.server->state(), "stopped");
  EXPECT_EQ(s.fake->release_kept_sinks(), 2) << "both requests' sinks outlived the transport";
}

}  // namespace http_server_test
