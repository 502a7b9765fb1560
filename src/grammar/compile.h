// The front door: a constraint's kind and text to a shared, immutable Grammar.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "grammar/grammar.h"
#include "grammar/limits.h"

namespace invar::grammar {

enum class Kind {
  gbnf,         // llama.cpp GBNF text, start rule `root`
  regex,        // a regular expression the whole output must match
  choice,       // a JSON array of strings: the output is exactly one of them
  json_schema,  // a JSON Schema document
  json_object,  // any JSON object (the text is ignored)
  tool_calls,   // tool calls in a chat template's syntax (grammar/tool_calls.h: the spec)
};

const char* kind_name(Kind k);

// Compiles text of the given kind. Throws Error (unsupported or malformed input, message
// naming the construct) or LimitError (a bound of `limits`, max_input_bytes first).
std::shared_ptr<const Grammar> compile(Kind kind, std::string_view text, const Limits& limits = {});

// compile() with default limits behind a process-wide LRU keyed by (kind, SHA-256 of text),
// thread-safe: a hit costs a hash of the text and returns the same Grammar object. Errors are not
// cached.
std::shared_ptr<const Grammar> compile_cached(Kind kind, std::string_view text);

struct CacheStats {
  size_t hits = 0, misses = 0, entries = 0;
};
CacheStats compile_cache_stats();
inline constexpr size_t kCompileCacheEntries = 64;

}  // namespace invar::grammar
