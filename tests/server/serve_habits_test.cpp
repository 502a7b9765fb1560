// vLLM's and llama-server's habits on the real `invar serve`: their flag spellings (-m, a
// positional model, -c/--ctx-size/--max-model-len, --max-num-seqs/--parallel/-np) reach the
// engine (read back from /props and /v1/models); an unknown flag of any subcommand names the
// nearest known one; without a model a random-weight demo model is served from the user's cache
// directory and said to be one; /tokenize and /detokenize in both peers' shapes on the real
// vocabulary; /metrics in vLLM's names, read by Prometheus's own Python client and equal to
// invar's families.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "command_run.h"
#include "serve_process.h"

namespace serve_habits_test {

using namespace invar::server::testing;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const char* kKey = "habits-key";

httplib::Client client_of(const ServeProcess& s) {
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(60, 0);
  c.set_default_headers({{"Authorization", std::string("Bearer ") + kKey}});
  return c;
}

json get_json(const ServeProcess& s, const std::string& path) {
  auto r = client_of(s).Get(path.c_str());
  EXPECT_TRUE(r && r->status == 200) << path << ": " << (r ? r->body : "no answer");
  return r && r->status == 200 ? json::parse(r->body) : json();
}

json post_json(const ServeProcess& s, const std::string& path, const json& body, int want = 200) {
  auto r = client_of(s).Post(path.c_str(), body.dump(), "application/json");
  EXPECT_TRUE(r) << path;
  if (!r) return json();
  EXPECT_EQ(r->status, want) << path << " " << body.dump() << " → " << r->body;
  return json::parse(r->body, nullptr, false);
}

// A fresh directory under the system's temporary directory, removed with the object.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / (name + "-" + std::to_string(getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

TEST(ServeHabits, PeersFlagSpellingsReachTheEngine) {
  struct Case {
    std::vector<std::string> args;
    int64_t ctx, slots;
  };
  const std::vector<Case> cases = {
      {{"-m", kTinyModel, "-c", "512", "-np", "3"}, 512, 3},                    // llama-server
      {{kTinyModel, "--max-model-len", "384", "--max-num-seqs", "5"}, 384, 5},  // vLLM
      {{"--model=" + kTinyModel, "--ctx-size=256", "--parallel", "2"}, 256, 2},
      {{"--model", kTinyModel, "--ctx", "320", "-np=7"}, 320, 7},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.args;
    for (const char* a : {"--threads", "1", "--api-key", kKey}) args.push_back(a);
    ServeProcess s(args, "habits_flags");
    ASSERT_NE(s.port(), 0) << s.log();
    const json props = get_json(s, "/props");
    EXPECT_EQ(props["default_generation_settings"]["n_ctx"], c.ctx) << props.dump();
    EXPECT_EQ(props["total_slots"], c.slots) << props.dump();
    EXPECT_EQ(props["model_path"], kTinyModel);
    EXPECT_EQ(get_json(s, "/v1/models")["data"][0]["max_model_len"], c.ctx);
    // The engine was built with that running-request limit (its start-up line says so).
    EXPECT_NE(s.log().find("per running request (up to " + std::to_string(c.slots) + ")"),
              std::string::npos)
        << s.log();
    // A prompt past the context is refused by the engine's own limit.
    post_json(s, "/v1/completions", {{"prompt", std::vector<int>(c.ctx, 9)}, {"max_tokens", 1}},
              400);
  }
  const auto zero =
      invar::test::command_run(kInvarBin + " serve -m " + kTinyModel + " --max-num-seqs 0 2>&1");
  EXPECT_EQ(zero.status, 2) << zero.out;
  EXPECT_NE(zero.out.find("--max-num-seqs must be at least 1"), std::string::npos) << zero.out;
}

// The subcommands `invar --help` lists.
std::vector<std::string> subcommands() {
  const auto help = invar::test::command_run(kInvarBin + " --help 2>&1");
  std::vector<std::string> out;
  std::stringstream ss(help.out);
  std::string line;
  bool in = false;
  while (std::getline(ss, line)) {
    if (line.rfind("Subcommands:", 0) == 0) {
      in = true;
      continue;
    }
    // "  name   description"; a wrapped description line starts with more spaces.
    if (in && line.size() > 2 && line[0] == ' ' && line[1] == ' ' && line[2] != ' ')
      out.push_back(line.substr(2, line.find(' ', 2) - 2));
  }
  return out;
}

TEST(ServeHabits, UnknownFlagsNameTheNearestKnownOne) {
  const auto run = [](const std::string& args) {
    return invar::test::command_run("timeout 20 " + kInvarBin + " " + args + " 2>&1");
  };
  const struct {
    std::string args, want;
  } cases[] = {
      {"serve --ctx-sze 512", "invar serve: unknown flag --ctx-sze (did you mean --ctx-size?)"},
      {"serve --max-num-seq 4", "unknown flag --max-num-seq (did you mean --max-num-seqs?)"},
      {"serve --max-num-seq=4", "unknown flag --max-num-seq (did you mean --max-num-seqs?)"},
      {"serve --prot 8080", "unknown flag --prot (did you mean --port?)"},
      {"serve --n-gpu-layerz 99", "unknown flag --n-gpu-layerz\n"},  // nothing near: no guess
      {"run --thread 2 m.gguf", "invar run: unknown flag --thread (did you mean --threads?)"},
      {"serv --port 1", "invar: unknown command serv (did you mean serve?)"},
  };
  for (const auto& c : cases) {
    const auto r = run(c.args);
    EXPECT_NE(r.status, 0) << c.args << ": " << r.out;
    EXPECT_NE(r.status, 124) << c.args << " kept running";
    EXPECT_NE(r.out.find(c.want), std::string::npos) << c.args << ":\n" << r.out;
  }
  // Every subcommand: a misspelt --help is named as such.
  const auto subs = subcommands();
  EXPECT_GE(subs.size(), 8u) << "the subcommands of invar --help were not found";
  EXPECT_NE(std::find(subs.begin(), subs.end(), "serve"), subs.end());
  for (const std::string& sub : subs) {
    const auto r = run(sub + " --hepl");
    EXPECT_NE(r.status, 0) << sub << ": " << r.out;
    EXPECT_NE(r.out.find("invar " + sub + ": unknown flag --hepl (did you mean --help?)"),
              std::string::npos)
        << sub << ":\n"
        << r.out;
  }
  // Known flags still parse (the hint is only for what CLI11 refused).
  EXPECT_EQ(run("serve --help").status, 0);
}

TEST(ServeHabits, NoModelServesTheDemoModelFromTheUserCacheAndSaysSo) {
  TempDir tmp("invar-habits-demo");
  const fs::path cache = tmp.path / "cache", work = tmp.path / "work";
  fs::create_directories(work);
  const fs::path cwd = fs::current_path();
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::string old_xdg = old ? old : "";
  setenv("XDG_CACHE_HOME", cache.c_str(), 1);
  fs::current_path(work);  // the child starts here; it must write nothing here
  auto s = std::make_unique<ServeProcess>(
      std::vector<std::string>{"--threads", "1", "--api-key", kKey}, "habits_demo");
  fs::current_path(cwd);
  if (old)
    setenv("XDG_CACHE_HOME", old_xdg.c_str(), 1);
  else
    unsetenv("XDG_CACHE_HOME");
  ASSERT_NE(s->port(), 0) << s->log();

  const fs::path file = cache / "invar/models/invar-demo-random-weights.gguf";
  EXPECT_TRUE(fs::exists(file)) << s->log();
  EXPECT_TRUE(fs::is_empty(work)) << "nothing is written to the working directory";
  const std::string log = s->log();
  size_t warnings = 0;
  for (size_t p = 0; (p = log.find("RANDOM-WEIGHT DEMO MODEL", p)) != std::string::npos; ++p)
    ++warnings;
  EXPECT_EQ(warnings, 2u) << "at start and when ready:\n" << log;
  EXPECT_NE(log.find(file.string()), std::string::npos) << log;

  const json m = get_json(*s, "/v1/models")["data"][0];
  EXPECT_EQ(m["id"], "invar-demo-random-weights") << m;
  EXPECT_EQ(m["random_weights"], true) << m;
  EXPECT_NE(m["warning"].get<std::string>().find("random-weight demo model"), std::string::npos);
  const json props = get_json(*s, "/props");
  EXPECT_EQ(props["random_weights"], true);
  EXPECT_EQ(props["model_path"], file.string());
  EXPECT_EQ(post_json(*s, "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 2}})["model"],
            "invar-demo-random-weights");

  // A second start finds the file and does not write it again.
  const auto mtime = fs::last_write_time(file);
  s.reset();
  setenv("XDG_CACHE_HOME", cache.c_str(), 1);
  ServeProcess again({"--threads", "1"}, "habits_demo_again");
  if (old)
    setenv("XDG_CACHE_HOME", old_xdg.c_str(), 1);
  else
    unsetenv("XDG_CACHE_HOME");
  ASSERT_NE(again.port(), 0) << again.log();
  EXPECT_EQ(again.log().find("first use"), std::string::npos) << again.log();
  EXPECT_EQ(fs::last_write_time(file), mtime);
}

class HabitsServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServeProcess(
        {"-m", kTinyModel, "--threads", "1", "--api-key", kKey, "--block-size", "16"},
        "habits_server");
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_->port(), 0) << server_->log(); }
  static ServeProcess* server_;
};
ServeProcess* HabitsServer::server_ = nullptr;

TEST_F(HabitsServer, TokenizeAndDetokenizeInBothPeersShapes) {
  const std::string text = "hi<|im_end|>";
  const json vllm = post_json(*server_, "/tokenize", {{"prompt", text}});
  const json llama = post_json(*server_, "/tokenize", {{"content", text}});
  ASSERT_TRUE(llama["tokens"].is_array()) << llama;
  EXPECT_EQ(llama["tokens"], vllm["tokens"]) << "one tokenisation, two shapes";
  EXPECT_EQ(llama.size(), 1u) << "llama-server's shape has tokens only: " << llama;
  EXPECT_EQ(post_json(*server_, "/v1/tokenize", {{"content", text}}), llama);
  // parse_special false: the control token's text stays text (more tokens, same bytes).
  const json plain =
      post_json(*server_, "/tokenize", {{"content", text}, {"parse_special", false}});
  EXPECT_GT(plain["tokens"].size(), llama["tokens"].size()) << plain;
  // with_pieces: the pieces spell the text.
  const json pieces = post_json(*server_, "/tokenize", {{"content", text}, {"with_pieces", true}});
  std::string spelt;
  for (const json& t : pieces["tokens"]) spelt += t["piece"].get<std::string>();
  EXPECT_EQ(spelt, text);
  EXPECT_EQ(pieces["tokens"].back()["piece"], "<|im_end|>");
  // /detokenize answers in the request's dialect.
  EXPECT_EQ(post_json(*server_, "/detokenize", {{"tokens", plain["tokens"]}}),
            json({{"content", text}}));
  EXPECT_EQ(post_json(*server_, "/v1/detokenize",
                      {{"tokens", llama["tokens"]}, {"model", "qwen3next-tiny"}}),
            json({{"prompt", text}}));
  // The same key as /v1.
  httplib::Client bare("127.0.0.1", server_->port());
  EXPECT_EQ(bare.Post("/v1/tokenize", R"({"content":"x"})", "application/json")->status, 401);
  EXPECT_EQ(bare.Get("/props")->status, 401);
  EXPECT_EQ(bare.Get("/version")->status, 200);
}

TEST_F(HabitsServer, VersionAndProps) {
  const json v = get_json(*server_, "/version");
  ASSERT_TRUE(v["version"].is_string()) << v;
  const auto cli = invar::test::command_run(kInvarBin + " --version 2>&1");
  EXPECT_NE(cli.out.find("invar " + v["version"].get<std::string>() + "\n"), std::string::npos)
      << cli.out;
  const json p = get_json(*server_, "/props");
  EXPECT_EQ(p["total_slots"], 64) << "the default running-request limit is unchanged";
  EXPECT_GT(p["default_generation_settings"]["n_ctx"].get<int64_t>(), 0);
  EXPECT_NE(p["build_info"].get<std::string>().find("numerics: "), std::string::npos) << p;
  EXPECT_TRUE(p["chat_template"].is_string());
  EXPECT_FALSE(p.contains("random_weights"));
}

// What Prometheus's Python client reads from /metrics (prometheus_read.py).
json prometheus_read(const std::string& exposition) {
  TempDir tmp("invar-habits-metrics");
  const fs::path file = tmp.path / "metrics.txt";
  std::ofstream(file) << exposition;
  const auto r = invar::test::command_run(std::string(INVAR_PYTHON3) + " " + INVAR_SOURCE_DIR +
                                          "/tests/server/prometheus_read.py " + file.string());
  EXPECT_EQ(r.status, 0) << "Prometheus's client could not read /metrics "
                            "(python3-prometheus-client installed?):\n"
                         << r.out;
  return r.status == 0 ? json::parse(r.out) : json();
}

TEST_F(HabitsServer, MetricsInVllmNamesReadByPrometheusClient) {
  for (int i = 0; i < 2; ++i)  // the second one hits the prefix cache
    post_json(*server_, "/v1/completions",
              {{"prompt",
                "The dashboards built for vLLM read these metrics unchanged, block by "
                "block, request after request, without a single edit to any panel."},
               {"max_tokens", 5},
               {"ignore_eos", true}});
  auto r = client_of(*server_).Get("/metrics");
  ASSERT_TRUE(r && r->status == 200);
  const json got = prometheus_read(r->body);
  ASSERT_TRUE(got.is_object());
  const json& types = got["types"];
  for (const auto& [family, type] : std::vector<std::pair<std::string, std::string>>{
           {"vllm:num_requests_running", "gauge"},
           {"vllm:num_requests_waiting", "gauge"},
           {"vllm:prompt_tokens", "counter"},
           {"vllm:generation_tokens", "counter"},
           {"vllm:prefix_cache_queries", "counter"},
           {"vllm:prefix_cache_hits", "counter"},
           {"vllm:num_preemptions", "counter"},
           {"vllm:time_to_first_token_seconds", "histogram"},
           {"vllm:inter_token_latency_seconds", "histogram"},
           {"vllm:time_per_output_token_seconds", "histogram"},
           {"vllm:e2e_request_latency_seconds", "histogram"},
       })
    EXPECT_EQ(types.value(family, "missing"), type) << family;
  // name{labels} → value; vLLM's samples carry model_name and engine.
  std::map<std::string, double> invar, vllm;
  std::map<std::string, std::vector<std::string>> les;
  for (const json& s : got["samples"]) {
    const std::string name = s[0];
    if (name.rfind("vllm:", 0) == 0) {
      EXPECT_EQ(s[1].value("model_name", ""), "qwen3next-tiny") << s;
      EXPECT_EQ(s[1].value("engine", ""), "0") << s;
      if (s[1].contains("le"))
        les[name].push_back(s[1]["le"]);
      else
        vllm[name] = s[2];
    } else if (!s[1].contains("le")) {
      invar[name] = s[2];
    }
  }
  EXPECT_GT(invar["invar_prompt_tokens_total"], 0);
  EXPECT_GT(invar["invar_cached_tokens_total"], 0) << "the second request hit the cache";
  EXPECT_EQ(vllm["vllm:prompt_tokens_total"], invar["invar_prompt_tokens_total"]);
  EXPECT_EQ(vllm["vllm:generation_tokens_total"], invar["invar_generated_tokens_total"]);
  EXPECT_EQ(vllm["vllm:prefix_cache_queries_total"], invar["invar_prompt_tokens_total"]);
  EXPECT_EQ(vllm["vllm:prefix_cache_hits_total"], invar["invar_cached_tokens_total"]);
  EXPECT_EQ(vllm["vllm:num_requests_running"], invar["invar_requests_running"]);
  EXPECT_EQ(vllm["vllm:num_requests_waiting"], invar["invar_queue_depth"]);
  EXPECT_EQ(vllm["vllm:time_to_first_token_seconds_count"],
            invar["invar_time_to_first_token_seconds_count"]);
  EXPECT_EQ(vllm["vllm:time_to_first_token_seconds_count"], 2);
  EXPECT_EQ(vllm["vllm:inter_token_latency_seconds_count"], 8) << "4 gaps per 5-token request";
  EXPECT_EQ(vllm["vllm:inter_token_latency_seconds_sum"],
            invar["invar_inter_token_latency_seconds_sum"]);
  EXPECT_EQ(vllm["vllm:e2e_request_latency_seconds_count"], 2);
  // vLLM's buckets, as its client writes them.
  ASSERT_EQ(les["vllm:time_to_first_token_seconds_bucket"].size(), 23u);
  EXPECT_EQ(les["vllm:time_to_first_token_seconds_bucket"][11], "1.0");
  EXPECT_EQ(les["vllm:time_to_first_token_seconds_bucket"].back(), "+Inf");
  EXPECT_EQ(les["vllm:inter_token_latency_seconds_bucket"].size(), 20u);
  EXPECT_EQ(les["vllm:e2e_request_latency_seconds_bucket"].size(), 22u);
}

}  // namespace

}  // namespace serve_habits_test
