// Response shapes (see docs/prior-art and the OpenAI reference):
//   content: choices[0].logprobs.content[] = {token, logprob, bytes, [id], top_logprobs: [{token,
//            logprob, bytes, [id]}]}: OpenAI/vLLM chat, llama.cpp chat *and* completions.
//   legacy:  choices[0].logprobs = {tokens: [t], token_logprobs: [lp], top_logprobs: [{t: lp}],
//            text_offset}: OpenAI/vLLM completions. vLLM's return_tokens_as_token_ids spells
//            tokens "token_id:N".
#include <charconv>

#include "core/error.h"
#include "probe/completion.h"

namespace invar::probe {
namespace {

// "token_id:N" -> N (vLLM --return-tokens-as-token-ids); -1 otherwise.
int64_t token_id_from_text(const std::string& t) {
  static const std::string prefix = "token_id:";
  if (t.compare(0, prefix.size(), prefix) != 0) return -1;
  int64_t v = -1;
  const char* b = t.data() + prefix.size();
  const char* e = t.data() + t.size();
  auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || p != e || b == e) return -1;
  return v;
}

double logprob_at(const json& j, const std::string& where) {
  if (!j.is_number()) throw Error(where + ": logprob missing or not a number");
  return j.get<double>();
}

Candidate candidate_from_content(const json& e, const std::string& where) {
  if (!e.is_object()) throw Error(where + ": expected an object");
  Candidate c;
  if (e.contains("token") && e["token"].is_string()) c.token = e["token"].get<std::string>();
  if (e.contains("id") && e["id"].is_number_integer()) {
    c.id = e["id"].get<int64_t>();
  } else {
    c.id = token_id_from_text(c.token);
  }
  if (!e.contains("logprob")) {
    if (e.contains("prob"))
      throw Error(where +
                  ": has 'prob' but no 'logprob' (llama.cpp post_sampling_probs is not supported)");
    throw Error(where + ".logprob: missing");
  }
  c.logprob = logprob_at(e["logprob"], where + ".logprob");
  return c;
}

void parse_content(const json& content, Completion& out) {
  if (!content.is_array()) throw Error("choices[0].logprobs.content: expected an array");
  for (size_t i = 0; i < content.size(); i++) {
    const std::string where = "choices[0].logprobs.content[" + std::to_string(i) + "]";
    TokenRecord r;
    r.chosen = candidate_from_content(content[i], where);
    const json& e = content[i];
    if (!e.contains("top_logprobs") || !e["top_logprobs"].is_array())
      throw Error(where + ".top_logprobs: missing (did the server honour top_logprobs?)");
    const json& top = e["top_logprobs"];
    for (size_t k = 0; k < top.size(); k++)
      r.top.push_back(
          candidate_from_content(top[k], where + ".top_logprobs[" + std::to_string(k) + "]"));
    out.tokens.push_back(std::move(r));
  }
}

void parse_legacy(const json& lp, Completion& out) {
  if (!lp.contains("tokens") || !lp["tokens"].is_array())
    throw Error("choices[0].logprobs.tokens: missing (neither the content nor the legacy shape)");
  const json& tokens = lp["tokens"];
  const json& token_lps = lp.value("token_logprobs", json());
  const json& tops = lp.value("top_logprobs", json());
  if (!token_lps.is_array() || token_lps.size() != tokens.size())
    throw Error("choices[0].logprobs.token_logprobs: missing or not one per token");
  if (!tops.is_array() || tops.size() != tokens.size())
    throw Error("choices[0].logprobs.top_logprobs: missing or not one per token");
  for (size_t i = 0; i < tokens.size(); i++) {
    const std::string where = "choices[0].logprobs";
    TokenRecord r;
    if (!tokens[i].is_string())
      throw Error(where + ".tokens[" + std::to_string(i) + "]: not a string");
    r.chosen.token = tokens[i].get<std::string>();
    r.chosen.id = token_id_from_text(r.chosen.token);
    r.chosen.logprob =
        logprob_at(token_lps[i], where + ".token_logprobs[" + std::to_string(i) + "]");
    if (!tops[i].is_object())
      throw Error(where + ".top_logprobs[" + std::to_string(i) + "]: expected an object");
    for (auto it = tops[i].begin(); it != tops[i].end(); ++it) {
      Candidate c;
      c.token = it.key();
      c.id = token_id_from_text(c.token);
      c.logprob =
          logprob_at(it.value(), where + ".top_logprobs[" + std::to_string(i) + "]." + it.key());
      r.top.push_back(std::move(c));
    }
    out.tokens.push_back(std::move(r));
  }
}

std::optional<int64_t> int_at(const json& j, std::initializer_list<const char*> path) {
  const json* p = &j;
  for (const char* k : path) {
    if (!p->is_object() || !p->contains(k)) return std::nullopt;
    p = &(*p)[k];
  }
  if (!p->is_number_integer()) return std::nullopt;
  return p->get<int64_t>();
}

}  // namespace

Completion completion_parse(const json& body, Api api) {
  if (!body.is_object()) throw Error("response: expected a JSON object");
  if (body.contains("error")) throw Error("server returned an error: " + body["error"].dump());
  if (!body.contains("choices") || !body["choices"].is_array() || body["choices"].empty())
    throw Error("response.choices: missing or empty");
  const json& ch = body["choices"][0];
  Completion out;
  if (api == Api::chat) {
    if (!ch.contains("message") || !ch["message"].is_object())
      throw Error("choices[0].message: missing (is this a chat completions response?)");
    const json& content = ch["message"].value("content", json());
    out.text = content.is_string() ? content.get<std::string>() : "";
  } else {
    if (!ch.contains("text") || !ch["text"].is_string())
      throw Error("choices[0].text: missing (is this a completions response?)");
    out.text = ch["text"].get<std::string>();
  }
  if (ch.contains("finish_reason") && ch["finish_reason"].is_string())
    out.finish_reason = ch["finish_reason"].get<std::string>();

  const json lp = ch.value("logprobs", json());
  if (lp.is_object() && lp.contains("content")) {
    out.shape = "content";
    // null content: nothing was generated (llama.cpp).
    if (!lp["content"].is_null()) parse_content(lp["content"], out);
  } else if (lp.is_object()) {
    out.shape = "legacy";
    parse_legacy(lp, out);
  } else if (!out.text.empty()) {
    // Nothing generated is the only excuse for no logprobs (llama.cpp omits the key then).
    throw Error(
        "choices[0].logprobs: missing although text was generated (server ignored logprobs?)");
  } else {
    out.shape = "none";
  }

  if (body.contains("system_fingerprint") && body["system_fingerprint"].is_string())
    out.system_fingerprint = body["system_fingerprint"].get<std::string>();
  if (body.contains("usage") && body["usage"].is_object()) {
    const json& u = body["usage"];
    out.usage.prompt_tokens = int_at(u, {"prompt_tokens"});
    out.usage.completion_tokens = int_at(u, {"completion_tokens"});
    out.usage.cached_tokens = int_at(u, {"prompt_tokens_details", "cached_tokens"});
  }
  // llama.cpp reports the same number as timings.cache_n.
  if (!out.usage.cached_tokens) out.usage.cached_tokens = int_at(body, {"timings", "cache_n"});
  return out;
}

namespace {

json candidate_to_json(const Candidate& c) {
  json j = {{"token", c.token}, {"logprob", c.logprob}};
  if (c.id >= 0) j["id"] = c.id;
  return j;
}

Candidate candidate_from_json(const json& j) {
  Candidate c;
  c.token = j.at("token").get<std::string>();
  c.logprob = j.at("logprob").get<double>();
  c.id = j.contains("id") ? j["id"].get<int64_t>() : -1;
  return c;
}

json opt_json(const std::optional<int64_t>& v) {
  return v ? json(*v) : json();
}

std::optional<int64_t> opt_from(const json& j, const char* k) {
  if (!j.contains(k) || j[k].is_null()) return std::nullopt;
  return j[k].get<int64_t>();
}

}  // namespace

json completion_to_json(const Completion& c) {
  json tokens = json::array();
  for (const auto& t : c.tokens) {
    json top = json::array();
    for (const auto& k : t.top) top.push_back(candidate_to_json(k));
    json e = candidate_to_json(t.chosen);
    e["top"] = std::move(top);
    tokens.push_back(std::move(e));
  }
  return {{"text", c.text},
          {"finish_reason", c.finish_reason},
          {"shape", c.shape},
          {"system_fingerprint", c.system_fingerprint},
          {"usage",
           {{"prompt_tokens", opt_json(c.usage.prompt_tokens)},
            {"completion_tokens", opt_json(c.usage.completion_tokens)},
            {"cached_tokens", opt_json(c.usage.cached_tokens)}}},
          {"tokens", std::move(tokens)}};
}

Completion completion_from_json(const json& j) {
  Completion c;
  c.text = j.at("text").get<std::string>();
  c.finish_reason = j.value("finish_reason", "");
  c.shape = j.value("shape", "");
  c.system_fingerprint = j.value("system_fingerprint", "");
  if (j.contains("usage")) {
    const json& u = j["usage"];
    c.usage.prompt_tokens = opt_from(u, "prompt_tokens");
    c.usage.completion_tokens = opt_from(u, "completion_tokens");
    c.usage.cached_tokens = opt_from(u, "cached_tokens");
  }
  for (const auto& e : j.at("tokens")) {
    TokenRecord r;
    r.chosen = candidate_from_json(e);
    for (const auto& k : e.at("top")) r.top.push_back(candidate_from_json(k));
    c.tokens.push_back(std::move(r));
  }
  return c;
}

}  // namespace invar::probe
