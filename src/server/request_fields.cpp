#include "server/request_fields.h"

#include "server/api_error.h"

namespace invar::server {
namespace {

using json = nlohmann::json;
using S = FieldStatus;
constexpr unsigned P = kCompletionsOnly, C = kChatOnly, B = kBothEndpoints;

// Ordered as docs/api.md: OpenAI's fields, then vLLM's, then llama-server's.
const std::vector<RequestField> kFields = {
    // OpenAI chat completions and (legacy) completions.
    {"messages", C, "OpenAI", S::implemented, "",
     "the conversation, rendered by the chat template"},
    {"prompt", P, "OpenAI", S::implemented, "",
     "a string, token ids, or a list of up to 256 of them: each its own engine request (prefilled "
     "once, `n` choices each), choices numbered prompt-major (`p·n + i`), usage summed"},
    {"model", B, "OpenAI", S::implemented, "", "a served name (--served-model-name); else 404"},
    {"audio", C, "OpenAI", S::rejected, "", "text-only models"},
    {"best_of", B, "OpenAI", S::no_op, "n", "best_of = n returns every choice"},
    {"echo", P, "OpenAI", S::implemented, "true", "prepends the prompt (and its logprobs)"},
    {"frequency_penalty", B, "OpenAI", S::implemented, "0.5",
     "-2..2: l -= f × the token's count in the output (vLLM's formula)"},
    {"function_call", C, "OpenAI", S::rejected, "", "deprecated by OpenAI: use tools"},
    {"functions", C, "OpenAI", S::no_op, "[]", "deprecated by OpenAI: use tools"},
    {"logit_bias", B, "OpenAI", S::implemented, "{\"5\": 2.5}",
     "token id -> bias in [-100, 100], added before the penalties"},
    {"logprobs", C, "OpenAI", S::implemented, "true", "per-token logprobs"},
    {"logprobs", P, "OpenAI", S::implemented, "2", "per-token logprobs, N candidates"},
    {"max_completion_tokens", B, "OpenAI", S::implemented, "3", "alias of max_tokens"},
    {"max_tokens", B, "OpenAI", S::implemented, "3", "completion length limit"},
    {"metadata", C, "OpenAI", S::implemented, "{\"k\": \"v\"}",
     "checked against OpenAI's limits; it tags stored completions, and invar stores none"},
    {"modalities", C, "OpenAI", S::no_op, "[\"text\"]", "text output only"},
    {"n", B, "OpenAI", S::implemented, "2", "choice i samples with seed + i"},
    {"parallel_tool_calls", C, "OpenAI", S::implemented, "false",
     "false: only the first tool call is returned (vLLM's filter)"},
    {"prediction", C, "OpenAI", S::rejected, "", "predicted outputs are not implemented"},
    {"presence_penalty", B, "OpenAI", S::implemented, "0.5",
     "-2..2: l -= p for tokens in the output (vLLM's formula)"},
    {"prompt_cache_key", C, "OpenAI", S::no_op, "any",
     "a routing hint; invar's prefix cache needs none"},
    {"prompt_cache_retention", C, "OpenAI", S::rejected, "",
     "cache retention follows --cache-bytes"},
    {"reasoning_effort", C, "OpenAI", S::implemented, "",
     "vLLM's meaning: none: enable_thinking off; minimal..max: on; also a template variable; "
     "400 without the switch"},
    {"response_format", B, "OpenAI", S::implemented, "{\"type\": \"json_object\"}",
     "text, json_object, json_schema (docs/structured-output.md)"},
    {"safety_identifier", C, "OpenAI", S::implemented, "\"s-1\"", "written to the request log"},
    {"seed", B, "OpenAI", S::implemented, "7", "random (and logged) when absent"},
    {"service_tier", C, "OpenAI", S::implemented, "\"flex\"",
     "auto, default, flex, priority; one tier: answered \"default\", the tier used"},
    {"stop", B, "OpenAI", S::implemented, "[\"zz\"]", "up to 16 stop strings"},
    {"store", C, "OpenAI", S::no_op, "false",
     "invar has no stored-completions API to keep them for: true is a 400"},
    {"stream", B, "OpenAI", S::implemented, "false", "server-sent events"},
    {"stream_options", B, "OpenAI", S::implemented, "{\"include_usage\": false}",
     "include_usage; continuous_usage_stats (vLLM: usage in every chunk); include_obfuscation "
     "only false"},
    {"suffix", P, "OpenAI", S::no_op, "\"\"", "insertion is not implemented"},
    {"temperature", B, "OpenAI", S::implemented, "0.5", "0 is greedy"},
    {"tool_choice", C, "OpenAI", S::implemented, "\"none\"",
     "none, auto, required or a named function (docs/chat.md)"},
    {"tools", C, "OpenAI", S::implemented, "[]",
     "passed to the model's template; calls parsed into tool_calls"},
    {"top_logprobs", C, "OpenAI", S::implemented, "0", "candidates per token, 0..20"},
    {"top_p", B, "OpenAI", S::implemented, "0.9", "nucleus sampling"},
    {"user", B, "OpenAI", S::implemented, "\"u-1\"", "written to the request log"},
    {"verbosity", C, "OpenAI", S::rejected, "", "for OpenAI's reasoning models"},
    {"web_search_options", C, "OpenAI", S::rejected, "", "no web search"},

    // vLLM's extra sampling and request fields.
    {"add_generation_prompt", C, "vLLM", S::implemented, "true", "passed to the model's template"},
    {"add_special_tokens", B, "vLLM", S::no_op, "true or false",
     "Qwen vocabularies add no BOS/EOS: the same tokens either way"},
    {"allowed_token_ids", B, "vLLM", S::rejected, "", "token masks are not implemented"},
    {"bad_words", B, "vLLM", S::no_op, "[]", "token masks are not implemented"},
    {"cache_salt", B, "vLLM", S::implemented, "\"salt\"", "isolates the prefix cache"},
    {"chat_template", C, "vLLM", S::rejected, "",
     "no per-request templates: the model's own, or --chat-template"},
    {"chat_template_kwargs", C, "vLLM", S::implemented, "{}",
     "template variables (enable_thinking)"},
    {"continue_final_message", C, "vLLM", S::implemented, "false",
     "continues the last assistant message"},
    {"documents", C, "vLLM", S::rejected, "", "retrieval documents are not passed to templates"},
    {"echo", C, "vLLM", S::no_op, "false", "echoing the last message is not implemented"},
    {"guided_choice", B, "vLLM", S::implemented, "[\"yes\", \"no\"]",
     "the output is one of the strings"},
    {"guided_decoding_backend", B, "vLLM", S::no_op, "any",
     "acts only with a guided field; one grammar engine serves every name"},
    {"guided_grammar", B, "vLLM", S::implemented, "\"root ::= [a-z]+\"", "a GBNF grammar"},
    {"guided_json", B, "vLLM", S::implemented, "{\"type\": \"integer\"}",
     "a JSON Schema (object or its text)"},
    {"guided_regex", B, "vLLM", S::implemented, "\"[a-z]{1,3}\"",
     "the whole output matches the regex"},
    {"guided_whitespace_pattern", B, "vLLM", S::rejected, "",
     "JSON output is compact: no whitespace pattern"},
    {"ignore_eos", B, "vLLM", S::implemented, "true", "end-of-sequence tokens do not stop"},
    {"include_reasoning", C, "vLLM", S::no_op, "true",
     "reasoning goes to reasoning_content (--reasoning-format none keeps it in content)"},
    {"include_stop_str_in_output", B, "vLLM", S::no_op, "false",
     "the text ends just before a stop string"},
    {"kv_transfer_params", B, "vLLM", S::rejected, "", "no disaggregated serving"},
    {"length_penalty", B, "vLLM", S::no_op, "1", "beam search only"},
    {"logits_processors", B, "vLLM", S::rejected, "", "no custom logits processors"},
    {"min_p", B, "vLLM", S::implemented, "0.1", "drops p < min_p × p_max, before top_p"},
    {"min_tokens", B, "vLLM", S::implemented, "1",
     "end of sequence and stop strings wait for this many tokens (at most max_tokens)"},
    {"mm_processor_kwargs", B, "vLLM", S::rejected, "", "text-only models"},
    {"priority", B, "vLLM", S::implemented, "1",
     "lower first among one client's requests (docs/serve.md: fairness)"},
    {"prompt_embeds", P, "vLLM", S::rejected, "", "prompts are text or token ids"},
    {"prompt_logprobs", B, "vLLM", S::implemented, "1",
     "whole: in the choice; streamed: in the first chunk"},
    {"repetition_penalty", B, "vLLM", S::implemented, "1.1",
     "(0, 100]: a token of prompt + output gets l > 0 ? l / r : l × r"},
    {"request_id", B, "vLLM", S::implemented, "\"r-1\"", "the response id is cmpl-/chatcmpl-ID"},
    {"return_token_ids", B, "vLLM", S::no_op, "false",
     "use return_tokens_as_token_ids with logprobs"},
    {"return_tokens_as_token_ids", B, "vLLM", S::implemented, "true",
     "logprob tokens as token_id:N"},
    {"skip_special_tokens", B, "vLLM", S::implemented, "false",
     "default true: control tokens add no text"},
    {"spaces_between_special_tokens", B, "vLLM", S::no_op, "true or false",
     "byte-level vocabularies insert no spaces either way"},
    {"stop_token_ids", B, "vLLM", S::implemented, "[5]", "more token ids that end a choice"},
    {"structural_tag", C, "vLLM", S::rejected, "", "structural tags are not implemented"},
    {"structured_outputs", B, "vLLM", S::implemented, "{\"choice\": [\"a\", \"b\"]}",
     "json, regex, choice, grammar or json_object"},
    {"top_k", B, "vLLM", S::implemented, "5", "0 or -1: off"},
    {"truncate_prompt_tokens", B, "vLLM", S::implemented, "2", "keeps the last N prompt tokens"},
    {"use_beam_search", B, "vLLM", S::no_op, "false", "beam search is not implemented"},
    {"vllm_xargs", B, "vLLM", S::rejected, "", "no custom extensions"},

    // llama-server's extras (its /completion fields, also read on its OpenAI endpoints).
    {"cache_prompt", B, "llama-server", S::no_op, "true or false",
     "reuse never changes the answer (DESIGN.md §1): always on"},
    {"dry_allowed_length", B, "llama-server", S::no_op, "any", "acts only with dry_multiplier"},
    {"dry_base", B, "llama-server", S::no_op, "any", "acts only with dry_multiplier"},
    {"dry_multiplier", B, "llama-server", S::no_op, "0", "DRY is not implemented"},
    {"dry_penalty_last_n", B, "llama-server", S::no_op, "any", "acts only with dry_multiplier"},
    {"dry_sequence_breakers", B, "llama-server", S::no_op, "any", "acts only with dry_multiplier"},
    {"dynatemp_exponent", B, "llama-server", S::no_op, "any", "acts only with dynatemp_range"},
    {"dynatemp_range", B, "llama-server", S::no_op, "0", "dynamic temperature is not implemented"},
    {"grammar", B, "llama-server", S::implemented, "\"root ::= \\\"ok\\\"\"", "a GBNF grammar"},
    {"id_slot", B, "llama-server", S::no_op, "-1", "no slots: any free capacity"},
    {"image_data", B, "llama-server", S::rejected, "",
     "images go in chat image_url parts (--mmproj)"},
    {"json_schema", B, "llama-server", S::implemented, "{\"type\": \"boolean\"}", "a JSON Schema"},
    {"lora", B, "llama-server", S::no_op, "[]", "no adapters"},
    {"min_keep", B, "llama-server", S::no_op, "0 or 1", "a sampler keeps at least one token"},
    {"mirostat", B, "llama-server", S::no_op, "0", "mirostat is not implemented"},
    {"mirostat_eta", B, "llama-server", S::no_op, "any", "acts only with mirostat"},
    {"mirostat_tau", B, "llama-server", S::no_op, "any", "acts only with mirostat"},
    {"n_indent", B, "llama-server", S::no_op, "0", "indentation stops are not implemented"},
    {"n_keep", B, "llama-server", S::no_op, "0", "no context shift: overflow is a 400"},
    {"n_predict", B, "llama-server", S::implemented, "3", "alias of max_tokens (-1: default)"},
    {"n_probs", B, "llama-server", S::no_op, "0", "use logprobs / top_logprobs"},
    {"post_sampling_probs", B, "llama-server", S::no_op, "false", "logprobs are pre-sampling"},
    {"repeat_last_n", B, "llama-server", S::implemented, "16",
     "the repetition penalty's window (-1: all, 0: none; 64 with repeat_penalty)"},
    {"repeat_penalty", B, "llama-server", S::implemented, "1.1",
     "repetition_penalty's rule over the last repeat_last_n tokens"},
    {"response_fields", B, "llama-server", S::rejected, "", "responses have OpenAI's shape"},
    {"return_progress", B, "llama-server", S::no_op, "false", "no progress events"},
    {"return_tokens", B, "llama-server", S::no_op, "false",
     "use return_tokens_as_token_ids with logprobs"},
    {"samplers", B, "llama-server", S::rejected, "", "the sampler order is fixed"},
    {"t_max_predict_ms", B, "llama-server", S::no_op, "0", "no time limit; use max_tokens"},
    {"timings_per_token", B, "llama-server", S::no_op, "false", "timings are in /metrics"},
    {"top_n_sigma", B, "llama-server", S::no_op, "-1", "top-n-sigma is not implemented"},
    {"typical_p", B, "llama-server", S::no_op, "1", "typical sampling is not implemented"},
    {"xtc_probability", B, "llama-server", S::no_op, "0", "XTC is not implemented"},
    {"xtc_threshold", B, "llama-server", S::no_op, "any", "acts only with xtc_probability"},
};

const char* endpoint_path(Endpoint e) {
  return e == Endpoint::chat ? "/v1/chat/completions" : "/v1/completions";
}

unsigned endpoint_bit(Endpoint e) {
  return e == Endpoint::chat ? kChatOnly : kCompletionsOnly;
}

void no_op_check(const RequestField& f, const json& v, const json& body) {
  std::string_view values = f.values;
  if (values == "any") return;
  if (values == "n") {
    auto n = body.find("n");
    json want = n == body.end() || n->is_null() ? json(1) : *n;
    if (v == want) return;
    throw bad_request(f.name, std::string("'") + f.name + "' must equal n (" +
                                  echo_cut(want.dump()) + "): " + f.note);
  }
  for (const json& a : field_accepted_values(f))
    if (v == a) return;
  throw bad_request(f.name, std::string("'") + f.name + "' is only accepted as " + f.values + " (" +
                                f.note + "), got " + echo_cut(v.dump()));
}

}  // namespace

const std::vector<RequestField>& request_fields() {
  return kFields;
}

std::string_view field_status_name(FieldStatus s) {
  switch (s) {
    case FieldStatus::implemented:
      return "implemented";
    case FieldStatus::no_op:
      return "no-op";
    case FieldStatus::rejected:
      return "rejected";
  }
  return "?";
}

std::vector<json> field_accepted_values(const RequestField& f) {
  std::string_view values = f.values;
  std::vector<json> out;
  if (f.status != FieldStatus::no_op || values == "any" || values == "n") return out;
  for (size_t at = 0; at <= values.size();) {
    size_t end = values.find(" or ", at);
    if (end == std::string_view::npos) end = values.size();
    out.push_back(json::parse(values.substr(at, end - at)));
    at = end + 4;
  }
  return out;
}

const RequestField* request_field_find(std::string_view name, Endpoint endpoint) {
  for (const RequestField& f : kFields)
    if (name == f.name && (f.endpoints & endpoint_bit(endpoint))) return &f;
  return nullptr;
}

void request_fields_check(const json& body, Endpoint endpoint) {
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string& name = it.key();
    const RequestField* f = request_field_find(name, endpoint);
    if (!f)
      throw bad_request(name, "unknown field '" + echo_cut(name) + "' for " +
                                  endpoint_path(endpoint) +
                                  " (docs/api.md lists every field invar accepts)");
    if (it->is_null()) continue;
    if (f->status == FieldStatus::rejected)
      throw bad_request(name, "'" + name + "' is not supported: " + f->note);
    if (f->status == FieldStatus::no_op) no_op_check(*f, *it, body);
  }
}

}  // namespace invar::server
