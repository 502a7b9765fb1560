// A trace for `invar simulate`: documents and the requests that run over them, one after another.
//   {"documents": {"D": 3100},
//    "requests": [{"name": "A", "doc": "D", "tail": 96, "salt": "", "repeat": 1}, ...]}
// A request's prompt is its document's tokens followed by a tail unique to the request *name*
// (the same name means the same tokens), so two requests share exactly their document prefix.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace invar::sim {

struct TraceRequest {
  std::string name;
  std::string doc;   // empty: no document (the prompt is the tail only)
  int64_t tail = 0;  // tokens after the document
  std::string salt;  // cache_salt: mixed into the first block's key
  int64_t repeat = 1;
};

struct Trace {
  std::map<std::string, int64_t> documents;  // name → length in tokens
  std::vector<TraceRequest> requests;

  int64_t prompt_tokens(const TraceRequest& r) const;
};

// Parses and validates (unknown document, negative lengths, empty prompt, repeat < 1...);
// throws invar::Error naming the field.
Trace trace_parse(const std::string& json_text);
Trace trace_load(const std::string& path);

}  // namespace invar::sim
