// The request surface of docs/api.md on the real `invar serve` (tiny model, real HTTP): every
// registered field sent to both endpoints (implemented → 200, no-op → 200 with each accepted
// value and 400 naming it otherwise, rejected → 400 naming it), min_p's candidate set and
// determinism, n choices = single requests with the derived seeds (whole and streamed),
// skip_special_tokens, streamed prompt_logprobs = whole ones, served model names, the JSON
// request log, CORS, a taken port, and --version / --help.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/socket.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "command_run.h"
#include "serve_process.h"
#include "server/request_fields.h"

namespace api_surface_test {

using namespace invar::server;
using namespace invar::server::testing;
using json = nlohmann::json;

namespace {

const char* kOrigin = "http://ok.example";

// One server for the suite, started on first use and killed when the test binary exits.
ServeProcess& surface_server() {
  static ServeProcess s(
      {"--model", kTinyModel, "--threads", "1", "--ctx", "1024", "--served-model-name", "tiny",
       "alias-2", "--allowed-origins", kOrigin, "--log-format", "json"},
      "api_surface");
  return s;
}

class Surface : public ::testing::Test {
 public:
  void SetUp() override {
    ASSERT_NE(surface_server().port(), 0) << "server did not start:\n" << surface_server().log();
  }
  static httplib::Client client() {
    httplib::Client c("127.0.0.1", surface_server().port());
    c.set_read_timeout(60, 0);
    return c;
  }
  // (status, raw body)
  static std::pair<int, std::string> post_raw(const std::string& path, const json& body,
                                              const httplib::Headers& h = {}) {
    auto r = client().Post(path.c_str(), h, body.dump(), "application/json");
    if (!r) return {0, ""};
    return {r->status, r->body};
  }
  static json post(const std::string& path, const json& body, int want = 200) {
    auto [status, text] = post_raw(path, body);
    EXPECT_EQ(status, want) << body.dump() << " → " << text;
    return json::parse(text, nullptr, false);
  }
  // The JSON request-log line whose id is `id` (waits for it: it is written after the reply).
  static json log_line(const std::string& id) {
    for (int tries = 0; tries < 250; ++tries) {
      std::stringstream ss(surface_server().log());
      std::string line;
      while (std::getline(ss, line)) {
        if (line.empty() || line[0] != '{') continue;
        json j = json::parse(line, nullptr, false);
        if (j.is_object() && j.value("id", "") == id) return j;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "no log line for " << id << ":\n" << surface_server().log();
    return json();
  }
};

const char* kCompletions = "/v1/completions";
const char* kChat = "/v1/chat/completions";

json base_body(Endpoint ep) {
  if (ep == Endpoint::chat)
    return {{"messages", {{{"role", "user"}, {"content", "hello there"}}}}, {"max_tokens", 2}};
  return {{"prompt", "hello there"}, {"max_tokens", 2}};
}

// A value the no-op field does not accept.
json other_value(const std::vector<json>& ok) {
  const json& accepted = ok.front();
  if (accepted.is_number()) {
    double most = accepted.get<double>();
    for (auto& v : ok) most = std::max(most, v.get<double>());
    return most + 1;
  }
  if (accepted.is_boolean()) return "maybe";
  if (accepted.is_string()) return "something-else";
  if (accepted.is_array()) return json::array({"audio"});
  return json{{"type", "json_object"}};
}

void expect_400_naming(const std::string& field, int status, const std::string& text,
                       const json& body) {
  EXPECT_EQ(status, 400) << body.dump() << " → " << text;
  json e = json::parse(text, nullptr, false);
  ASSERT_TRUE(e.is_object()) << text;
  EXPECT_EQ(e["error"]["param"], field) << text;
  EXPECT_NE(e["error"]["message"].dump().find(field), std::string::npos) << text;
}

TEST_F(Surface, EveryRegisteredFieldIsImplementedNoOpOrRejectedOnTheServer) {
  int sent = 0;
  for (Endpoint ep : {Endpoint::completions, Endpoint::chat}) {
    const char* path = ep == Endpoint::chat ? kChat : kCompletions;
    for (const RequestField& f : request_fields()) {
      if (!request_field_find(f.name, ep) || request_field_find(f.name, ep) != &f) continue;
      SCOPED_TRACE(std::string(path) + " " + f.name);
      std::string values = f.values;
      json body = base_body(ep);
      if (f.status == FieldStatus::implemented) {
        if (std::string(f.name) == "model") {
          body["model"] = "alias-2";
        } else if (values.empty()) {
          continue;  // the prompt itself: in every request
        } else {
          body[f.name] = json::parse(values);
        }
        auto [status, text] = post_raw(path, body);
        EXPECT_EQ(status, 200) << body.dump() << " → " << text;
        ++sent;
      } else if (f.status == FieldStatus::rejected) {
        body[f.name] = true;
        auto [status, text] = post_raw(path, body);
        expect_400_naming(f.name, status, text, body);
        ++sent;
      } else {
        std::vector<json> ok = values == "any" ? std::vector<json>{json(12345)}
                               : values == "n" ? std::vector<json>{json(1)}
                                               : field_accepted_values(f);
        for (const json& v : ok) {
          body[f.name] = v;
          auto [status, text] = post_raw(path, body);
          EXPECT_EQ(status, 200) << body.dump() << " → " << text;
          ++sent;
        }
        if (values == "any") continue;
        body[f.name] = values == "n" ? json(2) : other_value(ok);
        auto [status, text] = post_raw(path, body);
        expect_400_naming(f.name, status, text, body);
        ++sent;
      }
    }
  }
  EXPECT_GT(sent, 150);
  json body = base_body(Endpoint::completions);
  body["no_such_field"] = 1;
  auto [status, text] = post_raw(kCompletions, body);
  expect_400_naming("no_such_field", status, text, body);
}

// Completions with logprobs as token ids: per token (id, its logprob, the best logprob).
struct Sampled {
  std::string text, choice_dump;
  std::vector<double> chosen, best;
};
Sampled sample(const json& extra) {
  json body = {{"prompt", "the cache"}, {"max_tokens", 40}, {"temperature", 1.0},
               {"ignore_eos", true},    {"logprobs", 1},    {"return_tokens_as_token_ids", true}};
  body.update(extra);
  json r = Surface::post(kCompletions, body);
  Sampled s;
  const json& c = r["choices"][0];
  s.text = c["text"];
  s.choice_dump = c.dump();
  for (size_t i = 0; i < c["logprobs"]["token_logprobs"].size(); ++i) {
    s.chosen.push_back(c["logprobs"]["token_logprobs"][i]);
    double best = -1e30;
    for (auto& [k, v] : c["logprobs"]["top_logprobs"][i].items())
      best = std::max(best, v.get<double>());
    s.best.push_back(best);
  }
  return s;
}

TEST_F(Surface, MinPKeepsOnlyCandidatesNearTheBestAndStaysBitIdentical) {
  const double min_p = 0.3;
  int violations_without = 0, tokens = 0;
  for (int seed = 1; seed <= 4; ++seed) {
    Sampled with = sample({{"seed", seed}, {"min_p", min_p}});
    Sampled again = sample({{"seed", seed}, {"min_p", min_p}});
    EXPECT_EQ(with.choice_dump, again.choice_dump) << "min_p sampling is not deterministic";
    ASSERT_EQ(with.chosen.size(), 40u);
    for (size_t i = 0; i < with.chosen.size(); ++i, ++tokens)
      // temperature 1: p / p_max = exp(logprob − best logprob).
      EXPECT_GE(with.chosen[i] - with.best[i], std::log(min_p) - 1e-4)
          << "seed " << seed << " token " << i << " is outside the min_p candidate set";
    Sampled without = sample({{"seed", seed}});
    for (size_t i = 0; i < without.chosen.size(); ++i)
      violations_without += without.chosen[i] - without.best[i] < std::log(min_p);
  }
  EXPECT_EQ(tokens, 160);
  // The condition happened: without min_p the same seeds do pick such candidates.
  EXPECT_GT(violations_without, 0);
}

TEST_F(Surface, NChoicesEqualSingleRequestsWithDerivedSeeds) {
  json body = {{"prompt", "one two"}, {"max_tokens", 12}, {"temperature", 1.0},
               {"seed", 11},          {"logprobs", 2},    {"ignore_eos", true}};
  json many = body;
  many["n"] = 3;
  json r = post(kCompletions, many);
  ASSERT_EQ(r["choices"].size(), 3u) << r.dump();
  int64_t sum = 0;
  std::set<std::string> texts;
  for (int i = 0; i < 3; ++i) {
    json one = body;
    one["seed"] = 11 + i;
    json s = post(kCompletions, one);
    json got = r["choices"][i];
    EXPECT_EQ(got["index"], i);
    got.erase("index");
    json want = s["choices"][0];
    want.erase("index");
    EXPECT_EQ(got.dump(), want.dump()) << "choice " << i << " differs from seed " << 11 + i;
    sum += s["usage"]["completion_tokens"].get<int64_t>();
    texts.insert(got["text"]);
  }
  EXPECT_EQ(texts.size(), 3u) << "the choices should be different streams";
  EXPECT_EQ(r["usage"]["completion_tokens"], sum);
  EXPECT_EQ(r["usage"]["prompt_tokens"], post(kCompletions, body)["usage"]["prompt_tokens"]);

  // Streamed chat: each index's deltas = the whole single request with seed + i.
  json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
               {"max_tokens", 10},
               {"temperature", 1.0},
               {"seed", 21},
               {"ignore_eos", true}};
  json streamed = chat;
  streamed["n"] = 3;
  streamed["stream"] = true;
  streamed["stream_options"] = {{"include_usage", true}};
  auto [status, text] = post_raw(kChat, streamed);
  ASSERT_EQ(status, 200) << text;
  std::map<int, std::string> by_index;
  std::set<std::string> ids;
  int64_t usage_completion = -1;
  for (auto& d : sse_data(text)) {
    if (d == "[DONE]") continue;
    json c = json::parse(d);
    ids.insert(c["id"].get<std::string>());
    if (c["choices"].empty()) usage_completion = c["usage"]["completion_tokens"];
    for (auto& ch : c["choices"])
      by_index[ch["index"].get<int>()] += ch["delta"].value("content", "");
  }
  EXPECT_EQ(ids.size(), 1u) << "the choices share one id";
  ASSERT_EQ(by_index.size(), 3u) << text;
  int64_t sum_chat = 0;
  for (int i = 0; i < 3; ++i) {
    json one = chat;
    one["seed"] = 21 + i;
    json s = post(kChat, one);
    EXPECT_EQ(by_index[i], s["choices"][0]["message"]["content"]) << "choice " << i;
    sum_chat += s["usage"]["completion_tokens"].get<int64_t>();
  }
  EXPECT_EQ(usage_completion, sum_chat);
}

TEST_F(Surface, SkipSpecialTokensDropsOnlyControlTokenText) {
  const std::vector<std::string> specials = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  for (int seed = 1; seed <= 30; ++seed) {
    json body = {{"prompt", "a b c"}, {"max_tokens", 120},  {"temperature", 1.0},
                 {"seed", seed},      {"ignore_eos", true}, {"logprobs", 0}};
    json shown = body;
    shown["skip_special_tokens"] = false;
    json kept = post(kCompletions, shown)["choices"][0];
    bool has_special = false;
    for (auto& t : kept["logprobs"]["tokens"])
      for (auto& s : specials) has_special |= t == s;
    if (!has_special) continue;
    json skipped = post(kCompletions, body)["choices"][0];
    EXPECT_EQ(kept["logprobs"]["tokens"], skipped["logprobs"]["tokens"]) << "same tokens";
    std::string with = kept["text"], without = skipped["text"];
    EXPECT_NE(with, without);
    for (auto& s : specials)
      for (size_t p; (p = with.find(s)) != std::string::npos;) with.erase(p, s.size());
    EXPECT_EQ(with, without) << "skip_special_tokens must remove exactly the control tokens";
    for (auto& s : specials) EXPECT_EQ(without.find(s), std::string::npos);
    return;
  }
  FAIL() << "no seed in 1..30 generated a control token: the test exercised nothing";
}

TEST_F(Surface, StreamedPromptLogprobsEqualTheWholeOnes) {
  for (Endpoint ep : {Endpoint::completions, Endpoint::chat}) {
    const char* path = ep == Endpoint::chat ? kChat : kCompletions;
    json body = base_body(ep);
    body["prompt_logprobs"] = 2;
    body["max_tokens"] = 4;
    json whole = post(path, body)["choices"][0]["prompt_logprobs"];
    ASSERT_TRUE(whole.is_array() && whole.size() > 2) << whole.dump();
    body["stream"] = true;
    auto [status, text] = post_raw(path, body);
    ASSERT_EQ(status, 200);
    int carrying = 0;
    bool first = true;
    for (auto& d : sse_data(text)) {
      if (d == "[DONE]") continue;
      json c = json::parse(d);
      if (c["choices"].empty()) continue;
      bool has = c["choices"][0].contains("prompt_logprobs");
      EXPECT_EQ(has, first) << "prompt_logprobs belong to the first chunk only";
      if (has) {
        ++carrying;
        EXPECT_EQ(c["choices"][0]["prompt_logprobs"].dump(), whole.dump()) << path;
      }
      first = false;
    }
    EXPECT_EQ(carrying, 1) << path;
  }
}

TEST_F(Surface, ServedModelNamesAreTheOnlyNames) {
  auto models = client().Get("/v1/models");
  ASSERT_TRUE(models);
  json m = json::parse(models->body);
  ASSERT_EQ(m["data"].size(), 2u) << models->body;
  EXPECT_EQ(m["data"][0]["id"], "tiny");
  EXPECT_EQ(m["data"][1]["id"], "alias-2");
  EXPECT_EQ(client().Get("/v1/models/alias-2")->status, 200);
  json body = base_body(Endpoint::chat);
  body["model"] = "alias-2";
  EXPECT_EQ(post(kChat, body)["model"], "tiny") << "responses carry the first name";
  body["model"] = "qwen3next-tiny";  // the model's own id is not served under its name now
  json e = post(kChat, body, 404);
  EXPECT_EQ(e["error"]["code"], "model_not_found");
}

TEST_F(Surface, RequestLogHasOneJsonLinePerRequest) {
  json body = {{"prompt", "log me"}, {"max_tokens", 5},    {"seed", 99},
               {"temperature", 1.0}, {"ignore_eos", true}, {"request_id", "log-check-1"},
               {"user", "alice"}};
  post(kCompletions, body);
  json l = log_line("cmpl-log-check-1");
  EXPECT_EQ(l["status"], 200);
  EXPECT_EQ(l["endpoint"], kCompletions);
  EXPECT_EQ(l["method"], "POST");
  EXPECT_EQ(l["seed"], 99);
  EXPECT_EQ(l["user"], "alice");
  EXPECT_EQ(l["model"], "tiny");
  EXPECT_GT(l["prompt_tokens"].get<int>(), 0);
  EXPECT_EQ(l["completion_tokens"], 5);
  EXPECT_TRUE(l["cached_tokens"].is_number());
  ASSERT_TRUE(l["ttft_s"].is_number());
  EXPECT_GE(l["ttft_s"].get<double>(), 0);
  EXPECT_GE(l["duration_s"].get<double>(), l["ttft_s"].get<double>());
  EXPECT_TRUE(l["time"].is_string());

  // No seed: a random one is chosen, logged, and reproduces the completion.
  json unseeded = {{"prompt", "log me"},
                   {"max_tokens", 8},
                   {"temperature", 1.0},
                   {"ignore_eos", true},
                   {"request_id", "log-check-2"}};
  json first = post(kCompletions, unseeded);
  json l2 = log_line("cmpl-log-check-2");
  ASSERT_TRUE(l2["seed"].is_number_unsigned()) << l2.dump();
  unseeded["seed"] = l2["seed"];
  unseeded["request_id"] = "log-check-3";
  EXPECT_EQ(post(kCompletions, unseeded)["choices"][0]["text"], first["choices"][0]["text"]);

  // A refused request is logged with its status and message.
  auto [status, text] = post_raw(kCompletions, {{"prompt", "x"}, {"min_p", 7}});
  EXPECT_EQ(status, 400);
  bool found = false;
  for (int tries = 0; tries < 100 && !found; ++tries) {
    std::stringstream ss(surface_server().log());
    std::string line;
    while (std::getline(ss, line))
      if (line.find("\"status\":400") != std::string::npos &&
          line.find("min_p") != std::string::npos)
        found = json::parse(line)["id"].get<std::string>().rfind("req-", 0) == 0;
    if (!found) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(found) << surface_server().log();
}

TEST_F(Surface, CorsPreflightAndHeaders) {
  httplib::Headers h = {
      {"Origin", kOrigin},
      {"Access-Control-Request-Method", "POST"},
      {"Access-Control-Request-Headers", "authorization, content-type, x-stainless-os"}};
  auto pre = client().Options(kChat, h);
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->status, 200);
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Origin"), kOrigin);
  EXPECT_NE(pre->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  EXPECT_NE(pre->get_header_value("Access-Control-Allow-Headers").find("x-stainless-os"),
            std::string::npos);
  auto bad = client().Options(kChat, {{"Origin", "http://evil.example"}});
  ASSERT_TRUE(bad);
  EXPECT_FALSE(bad->has_header("Access-Control-Allow-Origin"));

  json body = base_body(Endpoint::chat);
  auto whole = client().Post(kChat, {{"Origin", kOrigin}}, body.dump(), "application/json");
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->get_header_value("Access-Control-Allow-Origin"), kOrigin);
  body["stream"] = true;
  auto stream = client().Post(kChat, {{"Origin", kOrigin}}, body.dump(), "application/json");
  ASSERT_TRUE(stream);
  EXPECT_EQ(stream->get_header_value("Access-Control-Allow-Origin"), kOrigin);
  auto err = client().Post(kChat, {{"Origin", kOrigin}}, "{", "application/json");
  ASSERT_TRUE(err);
  EXPECT_EQ(err->status, 400);
  EXPECT_EQ(err->get_header_value("Access-Control-Allow-Origin"), kOrigin);
  auto other = client().Get("/health", {{"Origin", "http://evil.example"}});
  ASSERT_TRUE(other);
  EXPECT_FALSE(other->has_header("Access-Control-Allow-Origin"));
}

TEST(SurfaceCli, NoCorsHeadersByDefault) {
  ServeProcess plain({"--model", kTinyModel, "--threads", "1", "--log-format", "none"},
                     "api_surface_plain");
  ASSERT_NE(plain.port(), 0) << plain.log();
  httplib::Client c("127.0.0.1", plain.port());
  auto pre = c.Options(kChat, {{"Origin", kOrigin}, {"Access-Control-Request-Method", "POST"}});
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->status, 405);
  EXPECT_FALSE(pre->has_header("Access-Control-Allow-Origin"));
  auto h = c.Get("/health", {{"Origin", kOrigin}});
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_FALSE(h->has_header("Access-Control-Allow-Origin"));
  EXPECT_EQ(plain.log().find("\"endpoint\""), std::string::npos) << "--log-format none";
}

TEST(SurfaceCli, TakenPortIsRefusedAtOnce) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  std::string port = std::to_string(ntohs(a.sin_port));
  auto r = invar::test::command_run("timeout 60 " + kInvarBin + " serve --model " + kTinyModel +
                                    " --port " + port + " 2>&1");
  ::close(fd);
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_NE(r.status, 124) << "invar serve kept running on a taken port";
  EXPECT_NE(r.out.find("Address already in use"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(":" + port), std::string::npos) << r.out;
}

TEST(SurfaceCli, VersionAndHelp) {
  for (const char* cmd : {" --version", " serve --version"}) {
    auto r = invar::test::command_run(kInvarBin + cmd + " 2>&1");
    EXPECT_EQ(r.status, 0) << r.out;
    for (const char* want : {"invar ", "numerics: invar-numerics-", "build: ", "isa: "})
      EXPECT_NE(r.out.find(want), std::string::npos) << cmd << ": " << r.out;
  }
  auto help = invar::test::command_run(kInvarBin + " serve --help 2>&1");
  for (const char* flag : {"--served-model-name", "--allowed-origins", "--log-format", "--version"})
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag;
}

}  // namespace

}  // namespace api_surface_test
