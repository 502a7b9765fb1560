#include "probe/plan.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/file_read.h"

namespace invar::probe {

extern const char* const seed_document_text;  // generated from data/probe/seed_document.txt

std::string arm_kind_name(ArmKind k) {
  switch (k) {
    case ArmKind::clean:
      return "clean";
    case ArmKind::contaminated:
      return "contaminated";
    case ArmKind::no_cache:
      return "no-cache";
    case ArmKind::threshold:
      return "threshold";
  }
  return "?";
}

std::string read_text_file(const std::string& path) {
  return file_read(path);
}

namespace {

std::string str_field(const json& j, const char* key, const std::string& where, bool required,
                      const std::string& def = "") {
  if (!j.contains(key)) {
    if (required) throw Error(where + "." + key + ": missing");
    return def;
  }
  if (!j[key].is_string()) throw Error(where + "." + key + ": expected a string");
  return j[key].get<std::string>();
}

int int_field(const json& j, const char* key, const std::string& where, int def, int lo, int hi) {
  if (!j.contains(key)) return def;
  if (!j[key].is_number_integer()) throw Error(where + "." + key + ": expected an integer");
  int64_t v = j[key].get<int64_t>();
  if (v < lo || v > hi)
    throw Error(where + "." + key + ": " + std::to_string(v) + " is outside [" +
                std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return int(v);
}

ArmKind kind_parse(const std::string& s, const std::string& where) {
  if (s == "clean") return ArmKind::clean;
  if (s == "contaminated") return ArmKind::contaminated;
  if (s == "no-cache" || s == "nocache" || s == "no_cache") return ArmKind::no_cache;
  if (s == "threshold") return ArmKind::threshold;
  throw Error(where + ".kind: '" + s + "' is not clean, contaminated, no-cache or threshold");
}

void plan_validate(const Plan& p) {
  std::set<std::string> docs, tasks, arms;
  for (const auto& d : p.documents)
    if (!docs.insert(d.name).second) throw Error("documents: '" + d.name + "' twice");
  for (const auto& t : p.tasks) {
    if (!tasks.insert(t.name).second) throw Error("tasks: '" + t.name + "' twice");
    if (!docs.count(t.document))
      throw Error("tasks." + t.name + ".document: no document named '" + t.document + "'");
  }
  if (p.arms.empty()) throw Error("arms: empty");
  for (const auto& a : p.arms) {
    if (!arms.insert(a.name).second) throw Error("arms: '" + a.name + "' twice");
    if (!tasks.count(a.task))
      throw Error("arms." + a.name + ".task: no task named '" + a.task + "'");
    const bool needs_warm = a.kind == ArmKind::contaminated || a.kind == ArmKind::threshold;
    if (needs_warm && !tasks.count(a.warm))
      throw Error("arms." + a.name + ".warm: a " + arm_kind_name(a.kind) +
                  " arm needs a task to run first ('" + a.warm + "' is none)");
    if (a.runs < 1) throw Error("arms." + a.name + ".runs: must be at least 1");
  }
}

}  // namespace

Plan plan_from_json(const json& j, const std::string& base_dir) {
  if (!j.is_object()) throw Error("plan: expected a JSON object");
  Plan p;
  p.runs = int_field(j, "runs", "plan", p.runs, 1, 100000);
  p.max_tokens = int_field(j, "max_tokens", "plan", p.max_tokens, 1, 1 << 20);
  p.top_k = int_field(j, "top_k", "plan", p.top_k, 0, 20);
  p.system = str_field(j, "system", "plan", false);
  p.filler = str_field(j, "filler", "plan", false, p.filler);
  if (std::filesystem::path f = str_field(j, "image", "plan", false); !f.empty()) {
    if (f.is_relative()) f = std::filesystem::path(base_dir) / f;
    p.image = image_data_url(f.string());
  }
  if (j.contains("cache_salt")) {
    if (!j["cache_salt"].is_boolean()) throw Error("plan.cache_salt: expected true or false");
    p.cache_salt = j["cache_salt"].get<bool>();
  }
  if (j.contains("request")) {
    if (!j["request"].is_object()) throw Error("plan.request: expected an object");
    p.request = j["request"];
  }
  if (!j.contains("documents") || !j["documents"].is_array())
    throw Error("plan.documents: missing");
  for (size_t i = 0; i < j["documents"].size(); i++) {
    const json& d = j["documents"][i];
    const std::string where = "documents[" + std::to_string(i) + "]";
    if (!d.is_object()) throw Error(where + ": expected an object");
    Document doc;
    doc.name = str_field(d, "name", where, true);
    if (d.contains("text")) {
      doc.text = str_field(d, "text", where, true);
    } else if (d.contains("file")) {
      std::filesystem::path f = str_field(d, "file", where, true);
      if (f.is_relative()) f = std::filesystem::path(base_dir) / f;
      doc.text = read_text_file(f.string());
    } else {
      throw Error(where + ": needs 'text' or 'file'");
    }
    p.documents.push_back(std::move(doc));
  }
  if (!j.contains("tasks") || !j["tasks"].is_array()) throw Error("plan.tasks: missing");
  for (size_t i = 0; i < j["tasks"].size(); i++) {
    const json& t = j["tasks"][i];
    const std::string where = "tasks[" + std::to_string(i) + "]";
    if (!t.is_object()) throw Error(where + ": expected an object");
    p.tasks.push_back({str_field(t, "name", where, true), str_field(t, "document", where, true),
                       str_field(t, "question", where, true),
                       str_field(t, "instructions", where, false)});
  }
  if (!j.contains("arms") || !j["arms"].is_array()) throw Error("plan.arms: missing");
  for (size_t i = 0; i < j["arms"].size(); i++) {
    const json& a = j["arms"][i];
    const std::string where = "arms[" + std::to_string(i) + "]";
    if (!a.is_object()) throw Error(where + ": expected an object");
    Arm arm;
    arm.kind = kind_parse(str_field(a, "kind", where, true), where);
    arm.name = str_field(a, "name", where, false, arm_kind_name(arm.kind));
    arm.task = str_field(a, "task", where, true);
    arm.warm = str_field(a, "warm", where, false);
    arm.runs = int_field(a, "runs", where, arm.kind == ArmKind::threshold ? 2 : p.runs, 1, 100000);
    arm.span = int_field(a, "span", where, arm.span, 0, 4096);
    arm.step = int_field(a, "step", where, arm.step, 1, 4096);
    p.arms.push_back(std::move(arm));
  }
  plan_validate(p);
  return p;
}

Plan plan_load(const std::string& path) {
  json j;
  try {
    j = json::parse(read_text_file(path));
  } catch (const json::parse_error& e) {
    throw Error(path + ": not valid JSON: " + e.what());
  }
  try {
    return plan_from_json(j, std::filesystem::path(path).parent_path().string());
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

const std::string& builtin_document() {
  static const std::string doc = seed_document_text;
  return doc;
}

Plan plan_preset_seed(const std::string& doc_text) {
  Plan p;
  p.documents.push_back({"document", doc_text.empty() ? builtin_document() : doc_text});
  // Two tasks on the same document with different questions and response schemas, as in the
  // write-up: A warms the shared document prefix, B is measured.
  p.tasks.push_back({"A", "document",
                     "Question: list every line item of the invoice in the document above.",
                     "Respond with JSON only: an array of objects with the keys \"code\", "
                     "\"description\", \"quantity\" and \"amount\"."});
  p.tasks.push_back({"B", "document",
                     "Question: what are the invoice number, the issue date, the due date and "
                     "the total amount due?",
                     "Respond with JSON only: {\"invoice_number\": string, \"issue_date\": "
                     "\"YYYY-MM-DD\", \"due_date\": \"YYYY-MM-DD\", \"total_due\": number}."});
  p.arms.push_back({"clean", ArmKind::clean, "B", "", p.runs});
  p.arms.push_back({"contaminated", ArmKind::contaminated, "B", "A", p.runs});
  p.arms.push_back({"no-cache", ArmKind::no_cache, "B", "", p.runs});
  p.arms.push_back({"threshold", ArmKind::threshold, "B", "A", 2, 16, 4});
  plan_validate(p);
  return p;
}

std::string document_truncate(const std::string& text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t cut = text.rfind('\n', max_bytes);
  if (cut == std::string::npos || cut == 0) cut = max_bytes;
  return text.substr(0, cut + (cut < text.size() && text[cut] == '\n' ? 1 : 0));
}

const Task& plan_task(const Plan& p, const std::string& name) {
  for (const auto& t : p.tasks)
    if (t.name == name) return t;
  throw Error("no task named '" + name + "'");
}

const Document& plan_document(const Plan& p, const std::string& name) {
  for (const auto& d : p.documents)
    if (d.name == name) return d;
  throw Error("no document named '" + name + "'");
}

std::string task_prompt(const Plan& p, const Task& t, int tail_fillers) {
  std::string s = plan_document(p, t.document).text;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  s += "\n\n" + t.question;
  if (!t.instructions.empty()) s += "\n" + t.instructions;
  for (int i = 0; i < tail_fillers; i++) s += p.filler;
  return s;
}

std::vector<int> threshold_fillers(const Arm& a) {
  std::vector<int> v;
  for (int n = 0; n <= 2 * a.span; n += a.step) v.push_back(n);
  return v;
}

std::string image_data_url(const std::string& path) {
  const std::string bytes = read_text_file(path);
  const char* mime =
      bytes.rfind("\x89PNG\r\n\x1a\n", 0) == 0 ? "image/png"
      : bytes.rfind("\xff\xd8\xff", 0) == 0    ? "image/jpeg"
      : bytes.size() >= 12 && bytes.rfind("RIFF", 0) == 0 && bytes.compare(8, 4, "WEBP") == 0
          ? "image/webp"
          : nullptr;
  if (!mime) throw Error(path + ": not a PNG, JPEG or WebP file");
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out = std::string("data:") + mime + ";base64,";
  out.reserve(out.size() + (bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t v = 0;
    for (size_t k = 0; k < 3; ++k)
      v = v << 8 | (k < n ? uint32_t(static_cast<unsigned char>(bytes[i + k])) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? a[(v >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

}  // namespace invar::probe
