#include "probe/runner.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>

#include "core/error.h"
#include "probe/openai_client.h"
#include "probe/progress.h"
#include "probe/server_process.h"

namespace invar::probe {
namespace {

std::string random_hex(int n) {
  std::random_device rd;
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < n; i++) s.push_back(hex[rd() & 15]);
  return s;
}

// One arm's server: the running one, or a fresh process started for the arm.
struct ArmTarget {
  std::unique_ptr<ServerProcess> process;
  std::string url;
};

ArmTarget arm_target_open(const Arm& arm, const ProbeOptions& o) {
  ArmTarget t;
  std::string tmpl = o.server_cmd;
  if (arm.kind == ArmKind::no_cache && !o.server_cmd_nocache.empty()) tmpl = o.server_cmd_nocache;
  if (tmpl.empty()) {
    t.url = o.url;
    return t;
  }
  const int port = port_free_find();
  const std::string cmd = server_cmd_expand(tmpl, port);
  const std::string log =
      o.out_dir.empty()
          ? ""
          : (std::filesystem::path(o.out_dir) / ("server-" + arm.name + ".log")).string();
  t.url = "http://127.0.0.1:" + std::to_string(port);
  t.process = std::make_unique<ServerProcess>(cmd, log);
  t.process->wait_healthy(t.url, o.health_timeout_s);
  return t;
}

}  // namespace

int64_t plan_request_count(const Plan& plan) {
  int64_t n = 0;
  for (const auto& a : plan.arms) {
    switch (a.kind) {
      case ArmKind::clean:
      case ArmKind::no_cache:
        n += a.runs;
        break;
      case ArmKind::contaminated:
        n += 1 + a.runs;
        break;
      case ArmKind::threshold:
        n += int64_t(threshold_fillers(a).size()) * (1 + a.runs);
        break;
    }
  }
  return n;
}

json run_record_to_json(const RunRecord& r) {
  return {{"arm", r.arm},
          {"role", r.role},
          {"task", r.task},
          {"cell", r.cell},
          {"tail_fillers", r.tail_fillers},
          {"run", r.run},
          {"cache_salt", r.cache_salt},
          {"seconds", r.seconds},
          {"digests",
           {{"order", r.digests.order}, {"sorted", r.digests.sorted}, {"text", r.digests.text}}},
          {"completion", completion_to_json(r.completion)}};
}

Report probe_run(const Plan& plan, const ProbeOptions& o, std::vector<RunRecord>* records) {
  if (o.server_cmd.empty() && o.url.empty()) throw Error("give --url or --server-cmd");
  std::ofstream jsonl;
  if (!o.out_dir.empty()) {
    std::filesystem::create_directories(o.out_dir);
    const auto path = std::filesystem::path(o.out_dir) / "records.jsonl";
    jsonl.open(path, std::ios::trunc);
    if (!jsonl) throw Error("cannot write " + path.string());
  }
  Report report;
  report.target = o.server_cmd.empty() ? o.url : "server-cmd: " + o.server_cmd;
  report.api = o.api == Api::chat ? "chat" : "completions";
  report.max_tokens = plan.max_tokens;
  report.top_k = plan.top_k;
  Progress progress(plan_request_count(plan), o.progress);
  // Salts are unique to this probe run, so a long-running server's earlier cache cannot leak in.
  const std::string salt_base = "invar-probe-" + random_hex(16);

  for (size_t ai = 0; ai < plan.arms.size(); ai++) {
    const Arm& arm = plan.arms[ai];
    ArmTarget target = arm_target_open(arm, o);
    OpenAIClient client(target.url, o.api, o.model, o.api_key, o.timeout_s);
    if (o.model.empty()) client.set_model(client.first_model());
    if (report.model.empty()) report.model = client.model();
    std::vector<RunRecord> measured;

    auto one = [&](const std::string& role, const std::string& task_name, int cell, int fillers,
                   int run, const std::string& salt, const std::string& what) {
      progress.show(arm.name, int(ai), int(plan.arms.size()), what);
      const Task& task = plan_task(plan, task_name);
      CompletionRequest req;
      req.system = plan.system;
      req.user = task_prompt(plan, task, fillers);
      req.max_tokens = plan.max_tokens;
      req.top_k = plan.top_k;
      req.cache_salt = plan.cache_salt ? salt : "";
      req.image_url = plan.image;
      req.extra = plan.request;
      RunRecord r;
      r.arm = arm.name;
      r.role = role;
      r.task = task_name;
      r.cell = cell;
      r.tail_fillers = fillers;
      r.run = run;
      r.cache_salt = req.cache_salt;
      const auto t0 = std::chrono::steady_clock::now();
      try {
        r.completion = client.complete(req);
      } catch (const Error& e) {
        progress.finish();
        throw Error("arm " + arm.name + ", " + what + ": " + e.what());
      }
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      r.digests = completion_digests(r.completion);
      progress.request_done();
      if (jsonl.is_open()) {
        jsonl << run_record_to_json(r).dump() << "\n";
        jsonl.flush();
      }
      if (records) records->push_back(r);
      if (role == "measure") measured.push_back(std::move(r));
    };

    const std::string arm_salt = salt_base + "-" + arm.name;
    switch (arm.kind) {
      case ArmKind::clean:
        for (int i = 0; i < arm.runs; i++)
          one("measure", arm.task, -1, 0, i, arm_salt,
              "run " + std::to_string(i + 1) + "/" + std::to_string(arm.runs));
        break;
      case ArmKind::contaminated:
        one("warm", arm.warm, -1, 0, 0, arm_salt, "warm-up " + arm.warm);
        for (int i = 0; i < arm.runs; i++)
          one("measure", arm.task, -1, 0, i, arm_salt,
              "run " + std::to_string(i + 1) + "/" + std::to_string(arm.runs));
        break;
      case ArmKind::no_cache:
        // A unique salt per request: nothing can be a hit even on a caching server.
        for (int i = 0; i < arm.runs; i++)
          one("measure", arm.task, -1, 0, i, arm_salt + "-" + std::to_string(i),
              "run " + std::to_string(i + 1) + "/" + std::to_string(arm.runs));
        break;
      case ArmKind::threshold: {
        const std::vector<int> fillers = threshold_fillers(arm);
        int run = 0;
        for (size_t c = 0; c < fillers.size(); c++) {
          const std::string salt = arm_salt + "-cell" + std::to_string(c);
          const std::string cell =
              "cell " + std::to_string(c + 1) + "/" + std::to_string(fillers.size());
          one("warm", arm.warm, int(c), fillers[c], 0, salt, cell + " warm-up " + arm.warm);
          for (int i = 0; i < arm.runs; i++)
            one("measure", arm.task, int(c), 0, run++, salt,
                cell + " run " + std::to_string(i + 1));
        }
        break;
      }
    }
    if (target.process) target.process->stop();
    report.arms.push_back(arm_summarize(arm, measured));
  }
  progress.finish();
  report_finish(report);
  return report;
}

}  // namespace invar::probe
