// `invar probe`: measures whether an OpenAI-compatible server keeps its answers when its prefix
// cache is warm (DESIGN.md §5). Exit status: 0 stable, 3 diverged, 2 errors.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "command.h"
#include "core/error.h"
#include "probe/plan.h"
#include "probe/progress.h"
#include "probe/report.h"
#include "probe/runner.h"

namespace invar::app {
namespace {

struct ProbeArgs {
  probe::ProbeOptions o;
  std::string api = "chat";
  std::string plan_path, preset, doc, html, image;
  std::vector<std::string> arms;
  size_t doc_chars = 0;
  int runs = 0, max_tokens = 0, top_k = -1, threshold_span = -1, threshold_step = 0;
  bool json = false, no_salt = false;
};

probe::Plan plan_build(const ProbeArgs& a) {
  if (a.plan_path.empty() == a.preset.empty())
    throw Error("give exactly one of --plan and --preset");
  probe::Plan plan;
  if (!a.preset.empty()) {
    if (a.preset != "seed") throw Error("--preset " + a.preset + ": unknown (known: seed)");
    std::string doc = a.doc.empty() ? probe::builtin_document() : probe::read_text_file(a.doc);
    if (a.doc_chars > 0) doc = probe::document_truncate(doc, a.doc_chars);
    plan = probe::plan_preset_seed(doc);
  } else {
    if (!a.doc.empty()) throw Error("--doc goes with --preset; a plan names its own documents");
    plan = probe::plan_load(a.plan_path);
  }
  if (a.runs > 0) {
    plan.runs = a.runs;
    for (auto& arm : plan.arms)
      if (arm.kind != probe::ArmKind::threshold) arm.runs = a.runs;
  }
  if (a.max_tokens > 0) plan.max_tokens = a.max_tokens;
  if (a.top_k >= 0) plan.top_k = a.top_k;
  for (auto& arm : plan.arms) {
    if (a.threshold_span >= 0) arm.span = a.threshold_span;
    if (a.threshold_step > 0) arm.step = a.threshold_step;
  }
  if (a.no_salt) plan.cache_salt = false;
  if (!a.image.empty()) plan.image = probe::image_data_url(a.image);
  if (!a.arms.empty()) {
    std::vector<probe::Arm> kept;
    for (const auto& name : a.arms) {
      bool found = false;
      for (const auto& arm : plan.arms)
        if (arm.name == name) kept.push_back(arm), found = true;
      if (!found) throw Error("--arms: the plan has no arm named '" + name + "'");
    }
    plan.arms = std::move(kept);
  }
  return plan;
}

int probe_main(const ProbeArgs& a) {
  probe::ProbeOptions o = a.o;
  if (a.api == "chat") {
    o.api = probe::Api::chat;
  } else if (a.api == "completions") {
    o.api = probe::Api::completions;
  } else {
    throw Error("--api " + a.api + ": expected chat or completions");
  }
  if (o.server_cmd.empty() && o.url.empty())
    throw Error("give --url URL or --server-cmd 'TEMPLATE with {port}'");
  if (!o.server_cmd.empty() && !o.url.empty()) throw Error("give --url or --server-cmd, not both");
  if (!o.server_cmd_nocache.empty() && o.server_cmd.empty())
    throw Error("--server-cmd-nocache needs --server-cmd");
  o.progress = probe::progress_wanted();
  const probe::Plan plan = plan_build(a);
  if (!plan.image.empty() && o.api != probe::Api::chat)
    throw Error("--image needs --api chat: only chat messages carry image parts");
  const probe::Report report = probe::probe_run(plan, o);
  const probe::json j = probe::report_json(report);
  if (!o.out_dir.empty()) {
    std::ofstream f(std::filesystem::path(o.out_dir) / "report.json");
    f << j.dump(2) << "\n";
  }
  if (!a.html.empty()) {
    std::ofstream f(a.html, std::ios::trunc);
    if (!f) throw Error("cannot write --html " + a.html);
    f << probe::report_html(report);
  }
  if (a.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s", probe::report_text(report).c_str());
  }
  std::fflush(stdout);
  return probe::report_exit_code(report);
}

Command probe_command("probe", [](CLI::App& root) -> Command::Run {
  auto args = std::make_shared<ProbeArgs>();
  auto* c = root.add_subcommand(
      "probe",
      "Black-box determinism probe: do an OpenAI-compatible server's top-20 logprobs stay\n"
      "bit-identical when its prefix cache is warm? Arms clean / contaminated / no-cache /\n"
      "threshold, three SHA-256 digests per completion. Exit 0 stable, 3 diverged, 2 errors.");
  auto& a = *args;
  c->add_option("--url", a.o.url,
                "a running server, http://host:port (a fresh cache_salt per cell)");
  c->add_option("--server-cmd", a.o.server_cmd,
                "start a fresh server per arm: shell command with {port}; waits for /health");
  c->add_option("--server-cmd-nocache", a.o.server_cmd_nocache,
                "the server command with prefix caching off, for the no-cache arm");
  c->add_option("--api", a.api, "chat (/v1/chat/completions) or completions (/v1/completions)")
      ->capture_default_str();
  c->add_option("--model", a.o.model, "model name (default: the first of /v1/models)");
  c->add_option("--api-key", a.o.api_key, "sent as a bearer token");
  c->add_option("--plan", a.plan_path, "plan JSON (documents, tasks, arms; see src/probe/plan.h)");
  c->add_option("--preset", a.preset,
                "seed: task A and B on one document, the write-up's four arms");
  c->add_option("--doc", a.doc, "document for --preset (default: built-in, ~3,000 tokens)");
  c->add_option(
      "--doc-chars", a.doc_chars,
      "cut the preset's document to its first lines within N bytes (small-context models)");
  c->add_option("--image", a.image,
                "PNG or JPEG FILE shown before every task's text (a data: URL image part; chat "
                "only): the arms then measure a multimodal shared prefix (a vision server: "
                "invar serve --mmproj, vLLM, llama-server --mmproj)");
  c->add_option("--runs", a.runs, "measured runs per arm (preset: 10)");
  c->add_option("--max-tokens", a.max_tokens, "tokens generated per completion (preset: 32)");
  c->add_option("--top-k", a.top_k, "candidates per token, 0..20 (preset: 20)");
  c->add_option("--threshold-span", a.threshold_span,
                "threshold arm: A's tail from -N to +N tokens (preset: 16)");
  c->add_option("--threshold-step", a.threshold_step,
                "threshold arm: step between cells (preset: 4)");
  c->add_option("--arms", a.arms, "run only these arms (by name)")->delimiter(',');
  c->add_flag("--no-salt", a.no_salt, "send no cache_salt (for servers that reject the field)");
  c->add_option("--out", a.o.out_dir, "directory for records.jsonl, report.json and server logs");
  c->add_option("--html", a.html, "write a self-contained HTML report (table + chart)");
  c->add_flag("--json", a.json, "print exactly one JSON object instead of the table");
  c->add_option("--timeout", a.o.timeout_s, "seconds per request")->capture_default_str();
  c->add_option("--health-timeout", a.o.health_timeout_s,
                "seconds a started server has to answer /health")
      ->capture_default_str();
  return [args]() { return probe_main(*args); };
});

}  // namespace
}  // namespace invar::app
