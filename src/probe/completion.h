// One completion as the probe sees it: per generated token the chosen token and the top-k
// candidates with their logprobs, in the order the server sent them, plus text, usage and
// fingerprint. Parsed from every response shape the probe knows (see completion_parse.cpp).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace invar::probe {

// Key order matters: the legacy completions shape carries candidates as a JSON object, and the
// server's order of its keys is the server order the first digest hashes.
using json = nlohmann::ordered_json;

enum class Api { chat, completions };

struct Candidate {
  std::string token;  // token text as the server spelled it
  int64_t id = -1;  // token id when the server reports one ("id", or vLLM's "token_id:N"); else -1
  double logprob = 0;  // exactly the JSON number received
};

struct TokenRecord {
  Candidate chosen;            // the generated token
  std::vector<Candidate> top;  // [k] candidates, server order
};

struct Usage {
  std::optional<int64_t> prompt_tokens;
  std::optional<int64_t> completion_tokens;
  std::optional<int64_t>
      cached_tokens;  // usage.prompt_tokens_details.cached_tokens (or timings.cache_n)
};

struct Completion {
  std::string text;
  std::vector<TokenRecord> tokens;  // [generated tokens]
  Usage usage;
  std::string system_fingerprint;  // "" when absent
  std::string finish_reason;
  std::string shape;  // which response shape was parsed: "content" or "legacy"
};

// Parses a /v1/chat/completions or /v1/completions response body. Accepts the OpenAI/vLLM
// `logprobs.content[]` shape (chat; llama.cpp also on completions) and the legacy completions
// shape (`tokens` / `token_logprobs` / `top_logprobs` objects). Throws invar::Error naming the
// missing or malformed field.
Completion completion_parse(const json& body, Api api);

// The same record as JSON (for the raw JSONL records) and back.
json completion_to_json(const Completion& c);
Completion completion_from_json(const json& j);

}  // namespace invar::probe
