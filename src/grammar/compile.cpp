#include "grammar/compile.h"

#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "core/sha256.h"
#include "grammar/builder.h"
#include "grammar/error.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "grammar/tool_calls.h"

namespace invar::grammar {

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::gbnf:
      return "gbnf";
    case Kind::regex:
      return "regex";
    case Kind::choice:
      return "choice";
    case Kind::json_schema:
      return "json_schema";
    case Kind::json_object:
      return "json_object";
    case Kind::tool_calls:
      return "tool_calls";
  }
  return "?";
}

namespace {

RuleId choice_rules(Builder& b, std::string_view text) {
  nlohmann::json list;
  try {
    list = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("choice: not JSON: ") + e.what());
  }
  if (!list.is_array() || list.empty())
    throw Error("choice: expected a non-empty JSON array of strings");
  std::vector<std::string> strings;
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_string())
      throw Error("choice: element " + std::to_string(i) + " is not a string");
    strings.push_back(list[i].get<std::string>());
  }
  const RuleId root = b.rule("root");
  b.define(root, b.literal_set(strings));
  return root;
}

// The text of a JSON front end, keys in their order (a schema's properties are written so).
nlohmann::ordered_json json_of(Kind kind, std::string_view text) {
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string(kind_name(kind)) + ": not JSON: " + e.what());
  }
}

}  // namespace

std::shared_ptr<const Grammar> compile(Kind kind, std::string_view text, const Limits& limits) {
  if (text.size() > limits.max_input_bytes) {
    throw LimitError(std::string(kind_name(kind)) + ": input of " + std::to_string(text.size()) +
                     " bytes is above " + std::to_string(limits.max_input_bytes) +
                     " (max_input_bytes)");
  }
  Builder b(limits);
  RuleId root = -1;
  switch (kind) {
    case Kind::gbnf:
      root = gbnf_parse(b, text);
      break;
    case Kind::regex: {
      root = b.rule("root");
      b.define(root, regex_expr(b, text, RegexOptions{}, "regex"));
      break;
    }
    case Kind::choice:
      root = choice_rules(b, text);
      break;
    case Kind::json_schema:
      root = json_schema_rules(b, json_of(kind, text));
      break;
    case Kind::json_object:
      root = json_object_rules(b);
      break;
    case Kind::tool_calls:
      root = tool_calls_rules(b, json_of(kind, text));
      break;
  }
  return std::make_shared<const Grammar>(lower(b, root));
}

namespace {

struct CompileCache {
  std::mutex mu;
  // Most recent first; the map points into the list.
  struct Entry {
    std::string key;
    std::shared_ptr<const Grammar> grammar;
    size_t bytes = 0;
  };
  std::list<Entry> lru;
  std::unordered_map<std::string, decltype(lru)::iterator> index;
  size_t hits = 0, misses = 0, bytes = 0, evictions = 0, running = 0;
  size_t budget = kCompileCacheBytesDefault;

  void shrink() {  // mu held
    while (!lru.empty() && (lru.size() > kCompileCacheEntries || bytes > budget)) {
      bytes -= lru.back().bytes;
      index.erase(lru.back().key);
      lru.pop_back();
      ++evictions;
    }
  }
};

CompileCache& cache() {
  static CompileCache c;
  return c;
}

}  // namespace

std::shared_ptr<const Grammar> compile_cached(Kind kind, std::string_view text,
                                              std::string_view scope) {
  // The content hash keys the cache: 64 hex characters per entry, whatever the text's size; the
  // scope (length-prefixed) keeps each tenant's entries its own.
  const std::string key = std::to_string(scope.size()) + ":" + std::string(scope) + ":" +
                          std::string(kind_name(kind)) + ":" + sha256_hex(text);
  CompileCache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (auto it = c.index.find(key); it != c.index.end()) {
      c.lru.splice(c.lru.begin(), c.lru, it->second);
      ++c.hits;
      return it->second->grammar;
    }
    ++c.running;
  }
  // Compile outside the lock: two threads may compile the same text; the first insert wins.
  std::shared_ptr<const Grammar> g;
  try {
    g = compile(kind, text);
  } catch (...) {
    std::lock_guard<std::mutex> lock(c.mu);
    --c.running;
    ++c.misses;
    throw;
  }
  const size_t bytes = g->size_bytes();
  std::lock_guard<std::mutex> lock(c.mu);
  --c.running;
  ++c.misses;
  if (auto it = c.index.find(key); it != c.index.end()) return it->second->grammar;
  if (bytes > c.budget) return g;  // would evict everything else and still not fit
  c.lru.push_front({key, g, bytes});
  c.index.emplace(key, c.lru.begin());
  c.bytes += bytes;
  c.shrink();
  return g;
}

CacheStats compile_cache_stats() {
  CompileCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return {c.hits, c.misses, c.lru.size(), c.bytes, c.evictions, c.running};
}

void compile_cache_budget_set(size_t bytes) {
  CompileCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.budget = bytes;
  c.shrink();
}

size_t compile_cache_budget() {
  CompileCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.budget;
}

}  // namespace invar::grammar
