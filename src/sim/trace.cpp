#include "sim/trace.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/file_read.h"

namespace invar::sim {

using nlohmann::json;

int64_t Trace::prompt_tokens(const TraceRequest& r) const {
  const int64_t doc = r.doc.empty() ? 0 : documents.at(r.doc);
  return doc + r.tail;
}

namespace {

int64_t get_length(const json& j, const std::string& where) {
  if (!j.is_number_integer()) throw Error("trace: " + where + " must be an integer");
  const int64_t v = j.get<int64_t>();
  if (v < 0 || v > (int64_t(1) << 32)) throw Error("trace: " + where + " out of range");
  return v;
}

}  // namespace

Trace trace_parse(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw Error(std::string("trace: invalid JSON: ") + e.what());
  }
  if (!j.is_object()) throw Error("trace: top level must be an object");
  Trace t;
  if (j.contains("documents")) {
    if (!j["documents"].is_object()) throw Error("trace: 'documents' must be an object");
    for (auto& [name, len] : j["documents"].items()) {
      t.documents[name] = get_length(len, "documents." + name);
    }
  }
  if (!j.contains("requests") || !j["requests"].is_array() || j["requests"].empty()) {
    throw Error("trace: 'requests' must be a non-empty array");
  }
  int i = 0;
  for (const auto& r : j["requests"]) {
    const std::string where = "requests[" + std::to_string(i++) + "]";
    if (!r.is_object()) throw Error("trace: " + where + " must be an object");
    TraceRequest q;
    if (!r.contains("name") || !r["name"].is_string()) {
      throw Error("trace: " + where + ".name must be a string");
    }
    q.name = r["name"].get<std::string>();
    if (r.contains("doc")) {
      if (!r["doc"].is_string()) throw Error("trace: " + where + ".doc must be a string");
      q.doc = r["doc"].get<std::string>();
      if (!q.doc.empty() && !t.documents.count(q.doc)) {
        throw Error("trace: " + where + ".doc names unknown document '" + q.doc + "'");
      }
    }
    if (r.contains("tail")) q.tail = get_length(r["tail"], where + ".tail");
    if (r.contains("salt")) {
      if (!r["salt"].is_string()) throw Error("trace: " + where + ".salt must be a string");
      q.salt = r["salt"].get<std::string>();
    }
    if (r.contains("repeat")) {
      q.repeat = get_length(r["repeat"], where + ".repeat");
      if (q.repeat < 1) throw Error("trace: " + where + ".repeat must be >= 1");
    }
    if (t.prompt_tokens(q) < 1) throw Error("trace: " + where + " has an empty prompt");
    t.requests.push_back(std::move(q));
  }
  return t;
}

Trace trace_load(const std::string& path) {
  return trace_parse(file_read(path, "trace"));
}

}  // namespace invar::sim
