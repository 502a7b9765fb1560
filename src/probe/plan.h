// What the probe runs: documents, tasks over them, arms, runs per arm, max tokens and top-k.
//
// Plan file (JSON); relative `file` paths resolve against the plan's directory:
// {
//   "documents": [{"name": "invoice", "file": "invoice.txt"} | {"name": "x", "text": "..."}],
//   "tasks": [{"name": "B", "document": "invoice", "question": "...", "instructions": "..."}],
//   "arms": [{"name": "clean", "kind": "clean", "task": "B"},
//            {"name": "contaminated", "kind": "contaminated", "task": "B", "warm": "A"},
//            {"name": "no-cache", "kind": "no-cache", "task": "B"},
//            {"name": "threshold", "kind": "threshold", "task": "B", "warm": "A",
//             "span": 16, "step": 4, "runs": 2}],
//   "runs": 10, "max_tokens": 32, "top_k": 20,
//   "system": "",          // optional system message (chat) / preamble (completions)
//   "filler": " ok",       // one token's worth of text; threshold cells append it to A's tail
//   "cache_salt": true,    // send a fresh cache_salt per cell (false for servers that reject it)
//   "image": "page.png",   // optional PNG or JPEG sent before every task's text (chat only):
//                          // the probe then measures a multimodal shared prefix
//   "request": {}          // extra fields merged into every request body
// }
#pragma once

#include <string>
#include <vector>

#include "probe/completion.h"

namespace invar::probe {

struct Document {
  std::string name;
  std::string text;
};

struct Task {
  std::string name;
  std::string document;      // name of a Document
  std::string question;      // what is asked about the document
  std::string instructions;  // optional response instructions (schema, format)
};

enum class ArmKind {
  clean,         // the task alone, `runs` times, one salt: runs 2.. are its own cache hits
  contaminated,  // `warm` once, then the task `runs` times, one salt
  no_cache,      // the task `runs` times, a unique salt per request (or a no-cache server)
  threshold,  // per cell: `warm` with its tail lengthened by n fillers, then the task `runs` times
};

struct Arm {
  std::string name;
  ArmKind kind = ArmKind::clean;
  std::string task;  // the measured task (B)
  std::string warm;  // the task run first (A): contaminated and threshold
  int runs = 0;      // measured runs; threshold: per cell
  int span = 16;     // threshold: cells for A's tail from -span to +span fillers...
  int step = 4;      // ...in steps of `step`
};

struct Plan {
  std::vector<Document> documents;
  std::vector<Task> tasks;
  std::vector<Arm> arms;
  int runs = 10;
  int max_tokens = 32;
  int top_k = 20;
  std::string system;
  std::string filler = " ok";
  bool cache_salt = true;
  json request = json::object();
  // data:image/...;base64 URL of the image every request shows before its text ("": none).
  std::string image;
};

std::string arm_kind_name(ArmKind k);

// Throws invar::Error naming the bad field.
Plan plan_from_json(const json& j, const std::string& base_dir);
Plan plan_load(const std::string& path);

// The write-up's plan: task A and task B on one document, arms clean / contaminated / no-cache /
// threshold, 10 runs per arm, 32 tokens. `doc_text` empty: the built-in document.
Plan plan_preset_seed(const std::string& doc_text);
// The first lines of `text` that fit in `max_bytes` (cut at a line end; at least one line). For
// servers whose context cannot hold the whole document (byte-level test vocabularies).
std::string document_truncate(const std::string& text, size_t max_bytes);
// The built-in ~3,000-token document (data/probe/seed_document.txt, compiled in).
const std::string& builtin_document();

const Task& plan_task(const Plan& p, const std::string& name);
const Document& plan_document(const Plan& p, const std::string& name);

// The user text of a task: document, blank line, question, instructions, then `tail_fillers`
// copies of the filler. The document comes first so tasks on it share a prefix.
std::string task_prompt(const Plan& p, const Task& t, int tail_fillers);

// Threshold cells: filler counts 0, step, ..., 2*span (A's tail from -span to +span).
std::vector<int> threshold_fillers(const Arm& a);

std::string read_text_file(const std::string& path);
// A PNG or JPEG file (told by its signature) as a data URL. Throws invar::Error.
std::string image_data_url(const std::string& path);

}  // namespace invar::probe
