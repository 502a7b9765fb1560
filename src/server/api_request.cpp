#include "server/api_request.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/chat_request_parse.h"
#include "server/output_constraint.h"
#include "server/request_fields.h"

namespace invar::server {
namespace {

using json = nlohmann::json;

constexpr int kMaxDepth = 64;  // deeper bodies are junk, not requests
constexpr size_t kMaxStops = 16;
constexpr int64_t kMaxChoices = 128;
constexpr size_t kMaxIdBytes = 256;
constexpr int64_t kRepeatLastNDefault = 64;  // llama-server's repeat_last_n default
// OpenAI's limits on metadata.
constexpr size_t kMaxMetadataPairs = 16, kMaxMetadataKey = 64, kMaxMetadataValue = 512;

const char* type_name(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

[[noreturn]] void wrong_type(const std::string& field, const char* want, const json& v) {
  throw bad_request(field, "'" + field + "' must be " + want + ", got " + type_name(v));
}

// The field's value, or nullptr when absent or null (OpenAI treats null as "not given").
const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

int64_t as_int(const json& v, const std::string& name) {
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      throw bad_request(name, "'" + name + "' is out of range");
    return int64_t(v.get<uint64_t>());
  }
  if (!v.is_number_integer()) wrong_type(name, "an integer", v);
  return v.get<int64_t>();
}

int64_t int_in(const json& v, const std::string& name, int64_t lo, int64_t hi) {
  int64_t x = as_int(v, name);
  if (x < lo || x > hi)
    throw bad_request(name, "'" + name + "' must be between " + std::to_string(lo) + " and " +
                                std::to_string(hi) + ", got " + std::to_string(x));
  return x;
}

// A number as the engine's float; its range is the engine's to check (request_check.h), and
// one beyond a float's range stays out of every range.
float as_float(const json& v, const std::string& name) {
  if (!v.is_number()) wrong_type(name, "a number", v);
  const double x = v.get<double>();
  if (x > double(std::numeric_limits<float>::max())) return std::numeric_limits<float>::infinity();
  if (x < -double(std::numeric_limits<float>::max()))
    return -std::numeric_limits<float>::infinity();
  return float(x);
}

bool as_bool(const json& v, const std::string& name) {
  if (!v.is_boolean()) wrong_type(name, "a boolean", v);
  return v.get<bool>();
}

int32_t token_id(const json& v, const std::string& name) {
  return int32_t(int_in(v, name, 0, std::numeric_limits<int32_t>::max()));
}

// One prompt of /v1/completions: a string or token ids, `name` the field that holds it.
CompletionPrompt prompt_one(const json& p, const std::string& name) {
  CompletionPrompt out;
  if (p.is_string()) {
    out.text = p.get<std::string>();
    if (out.text->empty()) throw bad_request(name, "'" + name + "' must not be empty");
  } else if (p.is_array()) {
    if (p.empty()) throw bad_request(name, "'" + name + "' must not be empty");
    for (size_t i = 0; i < p.size(); ++i)
      out.ids.push_back(token_id(p[i], name + "[" + std::to_string(i) + "]"));
  } else {
    wrong_type(name, "a string or an array of token ids", p);
  }
  return out;
}

// `prompt`: a string, token ids, or a list of prompts (strings or token-id arrays, as OpenAI
// and vLLM take them), at most kMaxPrompts.
void parse_prompt(const json& body, ApiRequest& r) {
  const json* p = field(body, "prompt");
  if (!p) throw bad_request("prompt", "'prompt' is required");
  std::vector<CompletionPrompt> prompts;
  if (p->is_array() && !p->empty() && !(*p)[0].is_number()) {
    if (p->size() > size_t(kMaxPrompts))
      throw bad_request("prompt", "'prompt' holds " + std::to_string(p->size()) +
                                      " prompts; a request takes at most " +
                                      std::to_string(kMaxPrompts));
    for (size_t i = 0; i < p->size(); ++i) {
      const json& one = (*p)[i];
      const std::string name = "prompt[" + std::to_string(i) + "]";
      if (!one.is_string() && !one.is_array())
        wrong_type(name, "a string or an array of token ids", one);
      prompts.push_back(prompt_one(one, name));
    }
  } else if (p->is_string() || p->is_array()) {
    prompts.push_back(prompt_one(*p, "prompt"));
  } else {
    wrong_type("prompt", "a string, an array of token ids or an array of prompts", *p);
  }
  r.prompt_text = std::move(prompts[0].text);
  r.prompt_ids = std::move(prompts[0].ids);
  r.more_prompts.assign(std::make_move_iterator(prompts.begin() + 1),
                        std::make_move_iterator(prompts.end()));
}

// Fields whose non-default values would change the output in a way invar does not implement.
void reject_unsupported(const json& body, bool chat) {
  if (const json* v = field(body, "suffix")) {
    if (!v->is_string()) wrong_type("suffix", "a string", *v);
    if (!v->get<std::string>().empty())
      throw bad_request("suffix", "'suffix' (insertion) is not supported");
  }
  if (const json* v = field(body, "functions")) {
    if (!v->is_array()) wrong_type("functions", "an array", *v);
    if (!v->empty()) throw bad_request("functions", "'functions' is not supported: use 'tools'");
  }
  for (const char* k : {"tools", "tool_choice"}) {
    const json* v = field(body, k);
    if (chat || !v || (v->is_array() && v->empty()) || (v->is_string() && *v == "none")) continue;
    throw bad_request(k, std::string("'") + k + "' is only for /v1/chat/completions");
  }
}

// The deepest bracket nesting of JSON text (brackets inside strings do not count). Checked
// before parsing: nlohmann's parse callback could bound the depth, but its callback parser
// rescans the enclosing array after every object it closes, quadratic in the number of objects
// (a 4 MiB body would hold an IO thread for most of an hour).
int json_nesting(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

void parse_stop(const json& body, ApiRequest& r) {
  const json* s = field(body, "stop");
  if (!s) return;
  if (s->is_string()) {
    r.stop.push_back(s->get<std::string>());
  } else if (s->is_array()) {
    if (s->size() > kMaxStops)
      throw bad_request("stop",
                        "'stop' may hold at most " + std::to_string(kMaxStops) + " strings");
    for (size_t i = 0; i < s->size(); ++i) {
      if (!(*s)[i].is_string()) wrong_type("stop[" + std::to_string(i) + "]", "a string", (*s)[i]);
      r.stop.push_back((*s)[i].get<std::string>());
    }
  } else {
    wrong_type("stop", "a string or an array of strings", *s);
  }
}

void parse_logprobs(const json& body, ApiRequest& r) {
  if (r.endpoint == Endpoint::chat) {
    if (const json* v = field(body, "logprobs")) r.logprobs = as_bool(*v, "logprobs");
    if (const json* v = field(body, "top_logprobs")) {
      r.top_logprobs = as_int(*v, "top_logprobs");
    }
  } else {
    if (const json* v = field(body, "logprobs")) {
      r.logprobs = true;
      r.top_logprobs = as_int(*v, "logprobs");
    }
    if (const json* v = field(body, "echo")) r.echo = as_bool(*v, "echo");
  }
  if (const json* v = field(body, "prompt_logprobs"))
    r.prompt_logprobs = as_int(*v, "prompt_logprobs");
  if (const json* v = field(body, "return_tokens_as_token_ids"))
    r.tokens_as_ids = as_bool(*v, "return_tokens_as_token_ids");
}

// OpenAI's logit_bias: {"token id": bias}, keys as decimal strings (the bias's range is the
// engine's to check).
void parse_logit_bias(const json& body, ApiRequest& r) {
  const json* v = field(body, "logit_bias");
  if (!v) return;
  if (!v->is_object()) wrong_type("logit_bias", "an object of token id strings to numbers", *v);
  for (auto it = v->begin(); it != v->end(); ++it) {
    const std::string& key = it.key();
    const bool digits = !key.empty() && key.size() <= 10 &&
                        key.find_first_not_of("0123456789") == std::string::npos;
    const long long id = digits ? std::stoll(key) : -1;
    if (id < 0 || id > std::numeric_limits<int32_t>::max())
      throw bad_request("logit_bias",
                        "'logit_bias' keys must be token ids in decimal, got '" + key + "'");
    if (!it->is_number())
      throw bad_request("logit_bias", "'logit_bias' values must be numbers in [-100, 100], got " +
                                          it->dump() + " for token " + key);
    r.sampling.logit_bias.emplace_back(int32_t(id), as_float(*it, "logit_bias"));
  }
  // In id order ("5" and "05" are one token: a 400, not a silent choice between them).
  auto& bias = r.sampling.logit_bias;
  std::sort(bias.begin(), bias.end());
  for (size_t i = 1; i < bias.size(); ++i)
    if (bias[i].first == bias[i - 1].first)
      throw bad_request("logit_bias",
                        "'logit_bias' names token " + std::to_string(bias[i].first) + " twice");
}

// The penalties: OpenAI's presence/frequency, vLLM's repetition_penalty, llama-server's
// repeat_penalty (the same multiplicative rule) over its repeat_last_n window.
void parse_penalties(const json& body, ApiRequest& r) {
  for (const char* k : {"presence_penalty", "frequency_penalty"})
    if (const json* v = field(body, k))
      (std::string_view(k) == "presence_penalty" ? r.sampling.presence_penalty
                                                 : r.sampling.frequency_penalty) = as_float(*v, k);
  const json* vllm = field(body, "repetition_penalty");
  const json* llama = field(body, "repeat_penalty");
  const float rep_vllm = vllm ? as_float(*vllm, "repetition_penalty") : 1;
  const float rep_llama = llama ? as_float(*llama, "repeat_penalty") : 1;
  if (rep_vllm != 1 && rep_llama != 1)
    throw bad_request(
        "repeat_penalty",
        "'repeat_penalty' (llama-server) and 'repetition_penalty' (vLLM) are the same "
        "penalty: send one of them");
  r.sampling.repetition_penalty = rep_vllm != 1 ? rep_vllm : rep_llama;
  if (rep_llama != 1) r.sampling.repetition_last_n = kRepeatLastNDefault;
  if (const json* v = field(body, "repeat_last_n"))
    r.sampling.repetition_last_n = as_int(*v, "repeat_last_n");
  parse_logit_bias(body, r);
}

// Characters of UTF-8 text (what OpenAI's length limits count).
size_t utf8_chars(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Chat fields of OpenAI's platform: metadata (validated as OpenAI limits it; it tags stored
// completions, and invar stores none) and service_tier.
void parse_platform(const json& body, ApiRequest& r) {
  if (const json* v = field(body, "metadata")) {
    if (!v->is_object()) wrong_type("metadata", "an object of strings", *v);
    if (v->size() > kMaxMetadataPairs)
      throw bad_request("metadata", "'metadata' may hold at most " +
                                        std::to_string(kMaxMetadataPairs) + " pairs");
    for (auto it = v->begin(); it != v->end(); ++it) {
      const std::string name = "metadata." + it.key();
      if (utf8_chars(it.key()) > kMaxMetadataKey)
        throw bad_request("metadata", "'metadata' keys may be at most " +
                                          std::to_string(kMaxMetadataKey) + " characters");
      if (!it->is_string()) wrong_type(name, "a string", *it);
      if (utf8_chars(it->get<std::string>()) > kMaxMetadataValue)
        throw bad_request(name, "'" + name + "' may be at most " +
                                    std::to_string(kMaxMetadataValue) + " characters");
    }
  }
  if (const json* v = field(body, "service_tier")) {
    if (!v->is_string()) wrong_type("service_tier", "a string", *v);
    const std::string& t = v->get_ref<const std::string&>();
    if (t != "auto" && t != "default" && t != "flex" && t != "priority")
      throw bad_request("service_tier",
                        "'service_tier' must be auto, default, flex or priority, not '" + t + "'");
    r.service_tier = t;
  }
}

// The fields beyond OpenAI's core that invar implements (request_fields.h): n, min_p,
// vLLM's token-level extras, llama-server's n_predict, and the ids written to the log.
void parse_surface(const json& body, ApiRequest& r) {
  if (const json* v = field(body, "n")) r.n = int_in(*v, "n", 1, kMaxChoices);
  if (const json* v = field(body, "min_p")) r.sampling.min_p = as_float(*v, "min_p");
  if (const json* v = field(body, "min_tokens")) r.sampling.min_tokens = as_int(*v, "min_tokens");
  if (const json* v = field(body, "skip_special_tokens"))
    r.skip_special_tokens = as_bool(*v, "skip_special_tokens");
  if (const json* v = field(body, "stop_token_ids")) {
    if (!v->is_array()) wrong_type("stop_token_ids", "an array of token ids", *v);
    for (size_t i = 0; i < v->size(); ++i)
      r.stop_token_ids.push_back(token_id((*v)[i], "stop_token_ids[" + std::to_string(i) + "]"));
  }
  if (const json* v = field(body, "truncate_prompt_tokens"))
    r.truncate_prompt_tokens =
        int_in(*v, "truncate_prompt_tokens", 1, std::numeric_limits<int32_t>::max());
  for (const char* k : {"request_id", "user", "safety_identifier"}) {
    const json* v = field(body, k);
    if (!v) continue;
    if (!v->is_string()) wrong_type(k, "a string", *v);
    if (v->get<std::string>().size() > kMaxIdBytes)
      throw bad_request(
          k, std::string("'") + k + "' is longer than " + std::to_string(kMaxIdBytes) + " bytes");
    (std::string_view(k) == "request_id" ? r.request_id : r.user) = v->get<std::string>();
  }
  if (const json* v = field(body, "priority"))
    r.priority = int_in(*v, "priority", std::numeric_limits<int32_t>::min(),
                        std::numeric_limits<int32_t>::max());
  if (const json* v = field(body, "n_predict"); v && !r.max_tokens) {
    int64_t x = int_in(*v, "n_predict", -1, std::numeric_limits<int32_t>::max());
    if (x == 0) throw bad_request("n_predict", "'n_predict' must be -1 or at least 1");
    if (x > 0) r.max_tokens = x;
  }
  if (const json* o = field(body, "stream_options")) {
    if (const json* v = field(*o, "include_obfuscation");
        v && as_bool(*v, "stream_options.include_obfuscation"))
      throw bad_request("stream_options.include_obfuscation",
                        "'stream_options.include_obfuscation' is not supported");
    if (const json* v = field(*o, "continuous_usage_stats"))
      r.continuous_usage = as_bool(*v, "stream_options.continuous_usage_stats");
  }
}

// A fault of the engine's check in the client's names: logprobs is completions' top_logprobs,
// repeat_penalty llama-server's repetition_penalty; a number as the client wrote it.
ApiError fault_words(RequestFault f, const json& body, const ApiRequest& r) {
  std::string name = f.param;
  if (name == "top_logprobs" && r.endpoint == Endpoint::completions) name = "logprobs";
  if (name == "repetition_penalty") {
    const json* vllm = field(body, "repetition_penalty");
    if (!vllm || (vllm->is_number() && vllm->get<double>() == 1)) name = "repeat_penalty";
  }
  if (name == "logit_bias" && f.index >= 0) {
    // The pair at fault as sent: its key (the client's spelling) and its value's JSON text.
    const int32_t id = r.sampling.logit_bias[size_t(f.index)].first;
    for (const auto& [key, value] : field(body, "logit_bias")->items())
      if (std::stoll(key) == id) return api_error_of(f, name, value.dump() + " for token " + key);
  }
  if (const json* v = field(body, name.c_str()); v && v->is_number() && !f.integral)
    f.got = v->get<double>();
  return api_error_of(f, name);
}

}  // namespace

ApiRequest api_request_parse(std::string_view text, Endpoint endpoint, const PromptLimits* limits) {
  json body;
  if (json_nesting(text) > kMaxDepth)
    throw bad_request("", "request body nests deeper than " + std::to_string(kMaxDepth));
  try {
    body = json::parse(text);
  } catch (const json::exception& e) {
    throw bad_request("", std::string("request body is not valid JSON: ") + e.what());
  }
  if (!body.is_object()) throw bad_request("", "request body must be a JSON object");
  request_fields_check(body, endpoint);
  if (limits) prompt_limits_check(body, *limits);

  ApiRequest r;
  r.endpoint = endpoint;
  if (const json* v = field(body, "model")) {
    if (!v->is_string()) wrong_type("model", "a string", *v);
    r.model = v->get<std::string>();
  }
  // Chat messages and output schemas keep the client's key order (a schema's properties are
  // written in it): those parse the body a second time, as ordered JSON.
  bool want_ordered = endpoint == Endpoint::chat;
  for (const char* k : output_constraint_fields()) want_ordered |= field(body, k) != nullptr;
  output_constraint_size_check(body);
  const nlohmann::ordered_json ordered =
      want_ordered ? nlohmann::ordered_json::parse(text) : nlohmann::ordered_json();
  if (endpoint == Endpoint::completions)
    parse_prompt(body, r);
  else
    r.chat = chat_request_parse(ordered);
  if (want_ordered) r.constraint = output_constraint_parse(ordered);

  reject_unsupported(body, endpoint == Endpoint::chat);
  const char* max_name = "max_tokens";
  const json* mt = field(body, "max_tokens");
  if (const json* v = field(body, "max_completion_tokens"))
    mt = v, max_name = "max_completion_tokens";
  if (mt) r.max_tokens = int_in(*mt, max_name, 1, std::numeric_limits<int32_t>::max());

  if (const json* v = field(body, "temperature"))
    r.sampling.temperature = as_float(*v, "temperature");
  if (const json* v = field(body, "top_p")) r.sampling.top_p = as_float(*v, "top_p");
  if (const json* v = field(body, "top_k")) r.sampling.top_k = as_int(*v, "top_k");  // -1: off
  if (const json* v = field(body, "seed")) {
    if (v->is_number_unsigned())
      r.sampling.seed = v->get<uint64_t>();
    else
      r.sampling.seed = uint64_t(as_int(*v, "seed"));
    r.has_seed = true;
  }
  parse_stop(body, r);
  if (const json* v = field(body, "stream")) r.stream = as_bool(*v, "stream");
  if (const json* v = field(body, "stream_options")) {
    if (!v->is_object()) wrong_type("stream_options", "an object", *v);
    if (const json* u = field(*v, "include_usage"))
      r.include_usage = as_bool(*u, "stream_options.include_usage");
  }
  parse_logprobs(body, r);
  if (const json* v = field(body, "cache_salt")) {
    if (!v->is_string()) wrong_type("cache_salt", "a string", *v);
    r.cache_salt = v->get<std::string>();
  }
  if (const json* v = field(body, "ignore_eos")) r.ignore_eos = as_bool(*v, "ignore_eos");
  parse_surface(body, r);
  parse_penalties(body, r);
  if (endpoint == Endpoint::chat) parse_platform(body, r);
  // The ranges are the engine's: the one check every front end runs.
  if (auto f = request_fields_fault(engine_request_of(r))) throw fault_words(*f, body, r);
  if (endpoint == Endpoint::chat && r.top_logprobs > 0 && !r.logprobs)
    throw bad_request("top_logprobs", "'top_logprobs' requires 'logprobs': true");
  return r;
}

GenerationRequest engine_request_of(const ApiRequest& r) {
  GenerationRequest g;
  g.sampling = r.sampling;
  g.max_tokens = r.max_tokens.value_or(std::numeric_limits<int32_t>::max());
  g.stop_strings = r.stop;
  g.top_logprobs = r.top_logprobs;
  g.prompt_logprobs = r.prompt_logprobs;
  g.cache_salt = r.cache_salt;
  g.client_key = r.client_key;
  g.priority = r.priority;
  g.skip_special_tokens = r.skip_special_tokens;
  return g;
}

}  // namespace invar::server
