// Runs a plan's arms against a server and summarises them (the probe's main loop).
#pragma once

#include <string>
#include <vector>

#include "probe/analysis.h"
#include "probe/plan.h"

namespace invar::probe {

struct ProbeOptions {
  std::string url;                 // a running server (used when server_cmd is empty)
  std::string server_cmd;          // "TEMPLATE with {port}": a fresh server for every arm
  std::string server_cmd_nocache;  // the same with caching off, for no-cache arms
  Api api = Api::chat;
  std::string model;  // "" → the first id of /v1/models (omitted if none)
  std::string api_key;
  std::string out_dir;            // "" → no files; else records.jsonl and server logs
  double timeout_s = 600;         // per request
  double health_timeout_s = 300;  // a started server must answer /health within this
  bool progress = false;          // arm / run / ETA on stderr
};

// Throws invar::Error on any failed request or server start: a measurement with holes in it is
// no measurement.
Report probe_run(const Plan& plan, const ProbeOptions& o,
                 std::vector<RunRecord>* records = nullptr);

// Number of completions `plan` asks for.
int64_t plan_request_count(const Plan& plan);

json run_record_to_json(const RunRecord& r);

}  // namespace invar::probe
