// `invar simulate`: predicts, without a model, where a hybrid engine's prefix cache restores KV
// and recurrent state of different computational origin (see src/sim/simulator.h).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "command.h"
#include "core/error.h"
#include "sim/simulator.h"

namespace invar::app {
namespace {

struct SimulateArgs {
  std::string policy = "vllm-align";
  std::string spec = "none";
  int64_t block_size = 1600;
  int64_t budget = 8192;
  std::string trace;
  std::string sweep;
  bool json = false;
};

std::string steps_text(const std::vector<sim::StepSpan>& steps) {
  std::string s;
  for (const auto& st : steps) {
    if (!s.empty()) s += " ";
    s += "[" + std::to_string(st.start) + "," + std::to_string(st.end) + ")";
  }
  return s.empty() ? "-" : s;
}

std::string states_text(const std::vector<int64_t>& v) {
  std::string s;
  for (auto q : v) s += (s.empty() ? "" : ",") + std::to_string(q);
  return s.empty() ? "none" : s;
}

int run_simulate(const SimulateArgs& a) {
  sim::Policy p;
  auto kind = sim::policy_parse(a.policy);
  if (!kind) {
    throw Error("--policy must be vllm-align, vllm-align-54076, vllm-all or invar (got '" +
                a.policy + "')");
  }
  auto spec = sim::spec_parse(a.spec);
  if (!spec) throw Error("--spec must be none, eagle, mtp or ngram (got '" + a.spec + "')");
  p.kind = *kind;
  p.spec = *spec;
  p.block_size = a.block_size;
  p.budget = a.budget;
  const sim::Trace trace = sim::trace_load(a.trace);

  if (!a.sweep.empty()) {
    const auto eq = a.sweep.find('=');
    const auto dots = a.sweep.find("..");
    if (eq == std::string::npos || dots == std::string::npos || dots < eq) {
      throw Error("--sweep must look like NAME=LO..HI (got '" + a.sweep + "')");
    }
    const std::string name = a.sweep.substr(0, eq);
    int64_t lo, hi;
    try {
      lo = std::stoll(a.sweep.substr(eq + 1, dots - eq - 1));
      hi = std::stoll(a.sweep.substr(dots + 2));
    } catch (const std::exception&) {
      throw Error("--sweep bounds must be integers (got '" + a.sweep + "')");
    }
    if (hi - lo > 100000) throw Error("--sweep covers at most 100001 lengths");
    const auto pts = sim::simulate_sweep(trace, p, name, lo, hi);
    if (a.json) {
      nlohmann::json j;
      j["sweep"] = nlohmann::json::array();
      for (const auto& pt : pts) {
        j["sweep"].push_back(
            {{"length", pt.length}, {"predicted", pt.diverges ? "diverges" : "stable"}});
      }
      std::printf("%s\n", j.dump().c_str());
      return 0;
    }
    std::printf("sweep of %s, policy %s, spec %s, block %lld, budget %lld\n", name.c_str(),
                a.policy.c_str(), a.spec.c_str(), (long long)p.block_size, (long long)p.budget);
    // Print ranges of equal predictions; the flips are where a range ends.
    size_t i = 0;
    while (i < pts.size()) {
      size_t j = i;
      while (j + 1 < pts.size() && pts[j + 1].diverges == pts[i].diverges) ++j;
      std::printf("  %lld..%lld  %s\n", (long long)pts[i].length, (long long)pts[j].length,
                  pts[i].diverges ? "diverges" : "stable");
      i = j + 1;
    }
    return 0;
  }

  const auto res = sim::simulate(trace, p);
  if (a.json) {
    nlohmann::json j;
    j["policy"] = a.policy;
    j["block_size"] = p.block_size;
    j["spec"] = a.spec;
    j["budget"] = p.budget;
    j["assumes"] = "batch-invariant engine: equal signatures predict bit-identical logits";
    j["runs"] = nlohmann::json::array();
    for (const auto& r : res.runs) {
      nlohmann::json steps = nlohmann::json::array();
      for (const auto& s : r.steps) steps.push_back({s.start, s.end});
      j["runs"].push_back({{"request", r.request},
                           {"run", r.run},
                           {"prompt_tokens", r.prompt_tokens},
                           {"cached_tokens", r.cached_tokens},
                           {"steps", steps},
                           {"states_written", r.states_written},
                           {"signature", r.signature},
                           {"predicted", r.diverges ? "diverges" : "stable"}});
    }
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("policy %s, spec %s, block %lld, budget %lld\n", a.policy.c_str(), a.spec.c_str(),
              (long long)p.block_size, (long long)p.budget);
  std::printf(
      "assumes a batch-invariant engine: equal signatures predict bit-identical logits\n\n");
  std::printf("%-10s %4s %7s %7s  %-30s %-12s %-13s %-9s %s\n", "request", "run", "prompt",
              "cached", "steps", "states", "signature", "predicted", "prefix from");
  for (const auto& r : res.runs) {
    std::printf("%-10s %4lld %7lld %7lld  %-30s %-12s %-13s %-9s %s\n", r.request.c_str(),
                (long long)r.run, (long long)r.prompt_tokens, (long long)r.cached_tokens,
                steps_text(r.steps).c_str(), states_text(r.states_written).c_str(),
                r.signature.substr(0, 12).c_str(), r.diverges ? "DIVERGES" : "stable",
                r.hit_origin.c_str());
  }
  return 0;
}

Command simulate_command("simulate", [](CLI::App& root) -> Command::Run {
  auto args = std::make_shared<SimulateArgs>();
  auto* c = root.add_subcommand(
      "simulate",
      "Predict, without a model, when a hybrid engine's prefix cache restores KV blocks and\n"
      "recurrent state computed by different steps (the cause of cache-dependent logits).\n"
      "Replays a trace of requests through a scheduler policy and prints, per run, the steps,\n"
      "the states stored, cached tokens and a numeric signature; runs of one request whose\n"
      "signatures differ are predicted to give different logits.");
  c->add_option("--policy", args->policy, "vllm-align | vllm-align-54076 | vllm-all | invar")
      ->capture_default_str();
  c->add_option("--spec", args->spec, "speculative method: none | eagle | mtp | ngram")
      ->capture_default_str();
  c->add_option("--block-size", args->block_size, "cache block size in tokens")
      ->capture_default_str();
  c->add_option("--budget", args->budget, "max tokens per scheduler step")->capture_default_str();
  c->add_option("--trace", args->trace,
                "trace JSON: {\"documents\": {\"D\": 3100}, \"requests\": [{\"name\": \"A\", "
                "\"doc\": \"D\", \"tail\": 96, \"salt\": \"\", \"repeat\": 1}, ...]}")
      ->required();
  c->add_option("--sweep", args->sweep,
                "NAME=LO..HI: vary NAME's total prompt length and print where the prediction "
                "for the other requests flips");
  c->add_flag("--json", args->json, "print one JSON object");
  return [args] { return run_simulate(*args); };
});

}  // namespace
}  // namespace invar::app
