#include "server/api_response.h"

#include <algorithm>

#include "core/utf8.h"

namespace invar::server {
namespace {

std::string token_text(const ResponseContext& c, int32_t id) {
  if (c.tokens_as_ids) return "token_id:" + std::to_string(id);
  return utf8::lossy(c.token_bytes(id));
}

json byte_list(const std::string& bytes) {
  json a = json::array();
  for (unsigned char b : bytes) a.push_back(int(b));
  return a;
}

json chat_entry(const ResponseContext& c, int32_t id, float logprob) {
  std::string bytes = c.token_bytes(id);
  return json{{"token", token_text(c, id)},
              {"logprob", double(logprob)},
              {"bytes", byte_list(bytes)},
              {"id", id}};
}

// The first top_logprobs candidates of t as the legacy {text: logprob} object.
json legacy_top(const ResponseContext& c, const TokenOut& t) {
  json o = json::object();
  const size_t n = std::min<size_t>(size_t(std::max<int64_t>(c.top_logprobs, 0)), t.top.size());
  for (size_t i = 0; i < n; ++i) {
    std::string key = token_text(c, t.top[i].id);
    if (!o.contains(key)) o[key] = double(t.top[i].logprob);  // keep the better-ranked duplicate
  }
  return o;
}

// The legacy (completions) logprobs object from its four parallel arrays.
json legacy_logprobs(json toks, json lps, json tops, json offs) {
  return json{{"tokens", std::move(toks)},
              {"token_logprobs", std::move(lps)},
              {"top_logprobs", std::move(tops)},
              {"text_offset", std::move(offs)}};
}

// The envelope every response object shares, around its choices and usage.
json envelope(const ResponseContext& c, const char* object, json choices, json usage) {
  json j{{"id", c.id},
         {"object", object},
         {"created", c.created},
         {"model", c.model},
         {"system_fingerprint", c.fingerprint}};
  if (!c.service_tier.empty()) j["service_tier"] = c.service_tier;
  j["choices"] = std::move(choices);
  j["usage"] = std::move(usage);
  return j;
}

// One SSE chunk.
json stream_chunk(const ResponseContext& c, json choices, json usage) {
  return envelope(c, c.endpoint == Endpoint::chat ? "chat.completion.chunk" : "text_completion",
                  std::move(choices), std::move(usage));
}

}  // namespace

json usage_json(const Usage& u) {
  json j{{"prompt_tokens", u.prompt_tokens},
         {"completion_tokens", u.completion_tokens},
         {"total_tokens", u.prompt_tokens + u.completion_tokens},
         {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
  if (u.speculative)
    j["completion_tokens_details"] = {{"draft_tokens", u.draft_tokens},
                                      {"accepted_draft_tokens", u.accepted_draft_tokens}};
  return j;
}

Usage usage_from_json(const json& usage) {
  Usage u;
  u.prompt_tokens = usage["prompt_tokens"].get<int64_t>();
  u.completion_tokens = usage["completion_tokens"].get<int64_t>();
  u.cached_tokens = usage["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
  if (const auto d = usage.find("completion_tokens_details"); d != usage.end()) {
    u.speculative = true;
    u.draft_tokens = (*d)["draft_tokens"].get<int64_t>();
    u.accepted_draft_tokens = (*d)["accepted_draft_tokens"].get<int64_t>();
  }
  return u;
}

json logprobs_chat_json(const ResponseContext& c, const std::vector<TokenOut>& tokens) {
  json content = json::array();
  for (auto& t : tokens) {
    json e = chat_entry(c, t.id, t.logprob);
    json top = json::array();
    for (int64_t k = 0; k < c.top_logprobs && k < int64_t(t.top.size()); ++k)
      top.push_back(chat_entry(c, t.top[k].id, t.top[k].logprob));
    e["top_logprobs"] = std::move(top);
    content.push_back(std::move(e));
  }
  return json{{"content", std::move(content)}};
}

json logprobs_legacy_json(const ResponseContext& c, const std::vector<TokenOut>& tokens,
                          int64_t offset0, int64_t* offset_end) {
  json toks = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
  int64_t off = offset0;
  for (auto& t : tokens) {
    toks.push_back(token_text(c, t.id));
    lps.push_back(double(t.logprob));
    tops.push_back(legacy_top(c, t));
    offs.push_back(off);
    off += int64_t(c.token_bytes(t.id).size());
  }
  if (offset_end) *offset_end = off;
  return legacy_logprobs(std::move(toks), std::move(lps), std::move(tops), std::move(offs));
}

json logprobs_legacy_prompt_json(const ResponseContext& c, const std::vector<int32_t>& prompt,
                                 const std::vector<TokenOut>& prompt_lp, int64_t* offset_end) {
  json toks = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
  int64_t off = 0;
  for (size_t i = 0; i < prompt.size(); ++i) {
    toks.push_back(token_text(c, prompt[i]));
    // prompt_lp[i − 1] scores prompt token i (the first token has no context to score it).
    if (i == 0 || i - 1 >= prompt_lp.size()) {
      lps.push_back(nullptr);
      tops.push_back(nullptr);
    } else {
      const TokenOut& t = prompt_lp[i - 1];
      lps.push_back(double(t.logprob));
      tops.push_back(legacy_top(c, t));
    }
    offs.push_back(off);
    off += int64_t(c.token_bytes(prompt[i]).size());
  }
  if (offset_end) *offset_end = off;
  return legacy_logprobs(std::move(toks), std::move(lps), std::move(tops), std::move(offs));
}

json prompt_logprobs_json(const ResponseContext& c, const std::vector<int32_t>& prompt,
                          const std::vector<TokenOut>& prompt_lp) {
  json out = json::array();
  out.push_back(nullptr);
  for (size_t i = 1; i < prompt.size(); ++i) {
    json o = json::object();
    if (i - 1 < prompt_lp.size()) {
      const TokenOut& t = prompt_lp[i - 1];
      o[std::to_string(t.id)] = {{"logprob", double(t.logprob)},
                                 {"rank", nullptr},
                                 {"decoded_token", token_text(c, t.id)}};
      for (size_t k = 0; k < t.top.size(); ++k) {
        std::string key = std::to_string(t.top[k].id);
        if (key == std::to_string(t.id)) {
          o[key]["rank"] = int64_t(k + 1);
          continue;
        }
        o[key] = {{"logprob", double(t.top[k].logprob)},
                  {"rank", int64_t(k + 1)},
                  {"decoded_token", token_text(c, t.top[k].id)}};
      }
    }
    out.push_back(std::move(o));
  }
  return out;
}

static json finish_value(const std::string& f) {
  return f.empty() ? json() : json(f);
}

json response_json(const ResponseContext& c, const std::string& text, const json& logprobs,
                   const std::string& finish_reason, const Usage& u, const json& prompt_logprobs) {
  json choice;
  choice["index"] = 0;
  if (c.endpoint == Endpoint::chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = logprobs;
  choice["finish_reason"] = finish_value(finish_reason);
  if (!prompt_logprobs.is_null()) choice["prompt_logprobs"] = prompt_logprobs;
  return envelope(c, c.endpoint == Endpoint::chat ? "chat.completion" : "text_completion",
                  json::array({std::move(choice)}), usage_json(u));
}

json chunk_json(const ResponseContext& c, const std::string& text, const json& logprobs,
                const std::string& finish_reason, bool first) {
  json choice;
  choice["index"] = 0;
  if (c.endpoint == Endpoint::chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (first || !text.empty()) delta["content"] = text;
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = logprobs;
  choice["finish_reason"] = finish_value(finish_reason);
  return stream_chunk(c, json::array({std::move(choice)}), nullptr);
}

json usage_chunk_json(const ResponseContext& c, const Usage& u) {
  return stream_chunk(c, json::array(), usage_json(u));
}

std::string json_text(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_event(const json& j) {
  return "data: " + json_text(j) + "\n\n";
}

std::string sse_event(std::string_view type, const json& j) {
  return "event: " + std::string(type) + "\ndata: " + json_text(j) + "\n\n";
}

}  // namespace invar::server
