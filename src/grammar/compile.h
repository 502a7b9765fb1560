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
// cached. The cache holds at most kCompileCacheEntries grammars and compile_cache_budget() bytes
// of them (Grammar::size_bytes); a grammar larger than the whole budget is compiled and returned
// but not kept. Grammars in use by requests stay alive through their shared_ptr whatever the
// cache evicts. `scope` (the request's tenant) partitions the entries: a grammar compiled for
// one scope is never another's hit, so no tenant can tell from a compile's time what another
// sent.
std::shared_ptr<const Grammar> compile_cached(Kind kind, std::string_view text,
                                              std::string_view scope = {});

struct CacheStats {
  size_t hits = 0, misses = 0, entries = 0;
  size_t bytes = 0;      // Grammar::size_bytes of the entries
  size_t evictions = 0;  // entries dropped for the entry count or the byte budget
  size_t running = 0;    // compilations in progress
};
CacheStats compile_cache_stats();
inline constexpr size_t kCompileCacheEntries = 64;
// A compiled grammar takes up to ~20 MB (max_grammar_elements and max_rules at their limits),
// from a few hundred bytes of schema: without a byte bound, 64 entries could hold over 1 GB.
inline constexpr size_t kCompileCacheBytesDefault = size_t{64} << 20;
void compile_cache_budget_set(size_t bytes);  // evicts at once down to the new budget
size_t compile_cache_budget();

}  // namespace invar::grammar
