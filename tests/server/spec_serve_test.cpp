// Speculative decoding through the real `invar serve`: `invar probe` against `--spec ngram`
// gets a stable verdict and, completion by completion, the digests `--spec none` gives, while
// the server really verified drafts; usage and /metrics report them; bad --spec values end the
// server with an error that names the flag.
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "serve_process.h"

namespace spec_serve_test {

using namespace invar::server::testing;
using json = nlohmann::json;

namespace {

const std::string kModel = std::string(INVAR_TEST_DATA_DIR) + "/models/qwen35-tiny.gguf";

json completion(const ServeProcess& s, const json& body) {
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(60, 0);
  auto r = c.Post("/v1/completions", body.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return json();
  EXPECT_EQ(r->status, 200) << r->body;
  return json::parse(r->body);
}

std::string metrics_of(const ServeProcess& s) {
  httplib::Client c("127.0.0.1", s.port());
  auto r = c.Get("/metrics");
  return r ? r->body : "";
}

// Runs `invar probe` against the server; returns its JSON report and fills `digests` with
// (arm, task, cell, run) → order digest from its records.
json probe(const ServeProcess& s, const std::filesystem::path& dir,
           std::map<std::string, std::string>& digests) {
  std::filesystem::create_directories(dir);
  const std::filesystem::path doc = dir / "doc.txt";
  {
    // About 480 tokens of the tiny model's vocabulary: 7 full blocks of 64, repetitive enough for
    // n-gram drafts. (At twice the length this test took 35 s under ASan instead of 23.)
    std::ofstream out(doc);
    for (int i = 0; i < 30; ++i) out << "the draft the block the state verify " << i % 7 << " ";
  }
  const std::string cmd = kInvarBin + " probe --url " + s.url() +
                          " --api completions --preset seed --runs 2 --max-tokens 16 --doc " +
                          doc.string() + " --json --out " + (dir / "out").string() + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  pclose(f);
  std::ifstream records(dir / "out" / "records.jsonl");
  std::string line;
  while (std::getline(records, line)) {
    const json r = json::parse(line);
    const std::string key = r["arm"].get<std::string>() + "/" + r["task"].dump() + "/" +
                            r["cell"].dump() + "/" + r["run"].dump();
    digests[key] = r["digests"]["order"].get<std::string>();
  }
  try {
    return json::parse(out);
  } catch (const std::exception&) {
    ADD_FAILURE() << "invar probe printed no JSON:\n" << out;
    return json();
  }
}

TEST(SpecServe, ProbeDigestsEqualPlainDecoding) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("invar-spec-serve-" + std::to_string(getpid()));
  std::map<std::string, std::string> plain_digests, spec_digests;
  json plain_report, spec_report;
  std::string spec_metrics, plain_metrics;
  {
    ServeProcess s({"--model", kModel, "--threads", "1"}, "spec_serve_none");
    ASSERT_NE(s.port(), 0) << s.log();
    plain_report = probe(s, dir / "none", plain_digests);
    plain_metrics = metrics_of(s);
  }
  {
    ServeProcess s({"--model", kModel, "--threads", "2", "--spec", "ngram", "--spec-tokens", "5",
                    "--spec-ngram-max", "2"},
                   "spec_serve_ngram");
    ASSERT_NE(s.port(), 0) << s.log();
    spec_report = probe(s, dir / "ngram", spec_digests);
    spec_metrics = metrics_of(s);
  }
  std::filesystem::remove_all(dir);
  EXPECT_EQ(plain_report["verdict"], "stable") << plain_report.dump();
  EXPECT_EQ(spec_report["verdict"], "stable") << spec_report.dump();
  EXPECT_GE(spec_digests.size(), 20u);
  EXPECT_EQ(plain_digests, spec_digests);
  // The condition happened: the server verified drafts (and rejected some).
  const double drafted = metric_value(spec_metrics, "invar_spec_draft_tokens_total");
  const double accepted = metric_value(spec_metrics, "invar_spec_accepted_tokens_total");
  EXPECT_GT(drafted, 0) << spec_metrics;
  EXPECT_GT(drafted, accepted);
  EXPECT_GT(metric_value(spec_metrics, "invar_spec_acceptance_length_count"), 0);
  EXPECT_NE(spec_metrics.find("invar_spec_acceptance_length_bucket{le=\"5\"}"), std::string::npos);
  EXPECT_EQ(plain_metrics.find("invar_spec_"), std::string::npos);
}

// The same with the model's own MTP head drafting: a generated qwen35 model whose MTP block
// agrees with the trunk often (make-model --mtp-bigram), so drafts are accepted and rejected.
TEST(SpecServe, ProbeDigestsWithMtpDraftsEqualPlainDecoding) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("invar-spec-mtp-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string model = (dir / "mtp.gguf").string();
  const std::string make = kInvarBin + " make-model --arch qwen35 --vocab " + kModel +
                           " --embd 64 --layers 4 --interval 2 --heads 4 --heads-kv 2 "
                           "--head-dim 16 --rot 8 --ff 96 --state 16 --mtp-bigram --out " +
                           model + " > /dev/null 2>&1";
  ASSERT_EQ(std::system(make.c_str()), 0) << make;
  std::map<std::string, std::map<std::string, std::string>> digests;  // arm → its digests
  std::map<std::string, json> reports;
  std::string mtp_metrics;
  for (const std::string spec : {"none", "mtp"}) {
    ServeProcess s({"--model", model, "--threads", spec == "mtp" ? "2" : "1", "--spec", spec,
                    "--spec-tokens", "3"},
                   "spec_serve_mtp_" + spec);
    ASSERT_NE(s.port(), 0) << s.log();
    reports[spec] = probe(s, dir / spec, digests[spec]);
    if (spec == "mtp") mtp_metrics = metrics_of(s);
  }
  std::filesystem::remove_all(dir);
  EXPECT_EQ(reports["none"]["verdict"], "stable") << reports["none"].dump();
  EXPECT_EQ(reports["mtp"]["verdict"], "stable") << reports["mtp"].dump();
  EXPECT_GE(digests["mtp"].size(), 20u);
  EXPECT_EQ(digests["none"], digests["mtp"]);
  const double drafted = metric_value(mtp_metrics, "invar_spec_draft_tokens_total");
  const double accepted = metric_value(mtp_metrics, "invar_spec_accepted_tokens_total");
  EXPECT_GT(accepted, 0) << mtp_metrics;
  EXPECT_GT(drafted, accepted) << mtp_metrics;
}

TEST(SpecServe, UsageReportsDrafts) {
  ServeProcess s({"--model", kModel, "--threads", "1", "--spec", "ngram"}, "spec_serve_usage");
  ASSERT_NE(s.port(), 0) << s.log();
  const json body = {{"prompt", "the cache the cache the cache the cache"},
                     {"max_tokens", 24},
                     {"n", 2},
                     {"seed", 4},
                     {"temperature", 0.7}};
  const json whole = completion(s, body);
  const json& d = whole["usage"]["completion_tokens_details"];
  ASSERT_TRUE(d.is_object()) << whole.dump();
  EXPECT_GT(d["draft_tokens"].get<int64_t>(), 0);
  EXPECT_LE(d["accepted_draft_tokens"].get<int64_t>(), d["draft_tokens"].get<int64_t>());
  // The same request as two single choices: n sums their counts.
  int64_t drafted = 0;
  for (uint64_t seed : {4u, 5u}) {
    json one = body;
    one["n"] = 1;
    one["seed"] = seed;
    drafted +=
        completion(s, one)["usage"]["completion_tokens_details"]["draft_tokens"].get<int64_t>();
  }
  EXPECT_EQ(d["draft_tokens"].get<int64_t>(), drafted);

  ServeProcess plain({"--model", kModel, "--threads", "1"}, "spec_serve_usage_none");
  ASSERT_NE(plain.port(), 0) << plain.log();
  const json p = completion(plain, body);
  EXPECT_FALSE(p["usage"].contains("completion_tokens_details")) << p.dump();
  EXPECT_EQ(p["choices"], whole["choices"]);
}

TEST(SpecServe, BadSpecFlagsEndTheServer) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--spec", "eagle"}, "--spec must be none, mtp or ngram"},
      {{"--spec", "ngram", "--spec-tokens", "0"}, "--spec-tokens"},
      {{"--spec", "ngram", "--spec-ngram-min", "3", "--spec-ngram-max", "2"}, "--spec-ngram-min"},
      {{"--spec", "mtp"}, "--spec mtp"}};
  for (const auto& [flags, message] : cases) {
    std::vector<std::string> args = {"--model", kModel, "--threads", "1"};
    args.insert(args.end(), flags.begin(), flags.end());
    ServeProcess s(args, "spec_serve_bad");
    for (int i = 0; i < 1000 && s.alive(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(s.port(), 0) << message << ": reported healthy";
    EXPECT_NE(s.exit_code(), 0) << message;
    EXPECT_NE(s.log().find(message), std::string::npos) << s.log();
  }
}

}  // namespace

}  // namespace spec_serve_test
