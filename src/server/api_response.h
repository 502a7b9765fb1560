// OpenAI response bodies: completions and chat, whole and as stream chunks, with logprobs in
// both shapes (chat `logprobs.content[]`, legacy completions `tokens` / `token_logprobs` /
// `top_logprobs` / `text_offset`). Pure JSON shaping: the caller supplies token texts.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "server/api_request.h"

namespace invar::server {

// Logprob values are kept as float and widened exactly to double: the JSON number printed is
// the shortest one that round-trips that double, so equal bits print equal text.
using json = nlohmann::ordered_json;

struct TokenOut {
  int32_t id = 0;
  float logprob = 0;
  std::vector<TokenLogprob> top;  // value desc, id asc (engine order)
};

struct ResponseContext {
  Endpoint endpoint = Endpoint::completions;
  std::string id;       // "cmpl-…" / "chatcmpl-…"
  int64_t created = 0;  // unix seconds
  std::string model;
  std::string fingerprint;
  std::string service_tier;  // the tier that served the request ("": not asked, not sent)
  bool logprobs = false;
  int64_t top_logprobs = 0;
  bool tokens_as_ids = false;
  std::function<std::string(int32_t)> token_bytes;  // raw bytes of a token
};

// usage (engine/request.h): speculative decoding's drafts verified and kept are reported as
// completion_tokens_details when the server runs a drafter (docs/api.md).
json usage_json(const Usage& u);
Usage usage_from_json(const json& usage);  // the inverse of usage_json

// Logprobs for `tokens`. Legacy shape: text_offset counts bytes of the choice's text, starting
// at `offset0`; it returns the offset after the last token through *offset_end.
json logprobs_chat_json(const ResponseContext& c, const std::vector<TokenOut>& tokens);
json logprobs_legacy_json(const ResponseContext& c, const std::vector<TokenOut>& tokens,
                          int64_t offset0, int64_t* offset_end);
// Echoed prompt in the legacy shape: the first token has null logprobs.
json logprobs_legacy_prompt_json(const ResponseContext& c, const std::vector<int32_t>& prompt,
                                 const std::vector<TokenOut>& prompt_lp, int64_t* offset_end);
// vLLM's prompt_logprobs: [null, {"<id>": {"logprob", "rank", "decoded_token"}}, …].
json prompt_logprobs_json(const ResponseContext& c, const std::vector<int32_t>& prompt,
                          const std::vector<TokenOut>& prompt_lp);

// Whole response. `logprobs` is the already-shaped logprobs value (null when not requested).
json response_json(const ResponseContext& c, const std::string& text, const json& logprobs,
                   const std::string& finish_reason, const Usage& u, const json& prompt_logprobs);

// One stream chunk; finish_reason "" → null. Chat chunks carry `delta`; `first` adds the role.
json chunk_json(const ResponseContext& c, const std::string& text, const json& logprobs,
                const std::string& finish_reason, bool first);
// The final usage-only chunk of stream_options.include_usage (choices: []).
json usage_chunk_json(const ResponseContext& c, const Usage& u);

// The one SSE writer of every front end: OpenAI's chat and completions send unnamed events,
// Anthropic's Messages and OpenAI's Responses typed ones.
std::string sse_event(const json& j);                         // "data: <json>\n\n"
std::string sse_event(std::string_view type, const json& j);  // "event: <type>\ndata: <json>\n\n"
std::string json_text(const json& j);                         // compact, invalid UTF-8 replaced

}  // namespace invar::server
