#include <algorithm>
#include <initializer_list>

#include "server/api_response.h"  // json_text
#include "server/json_fields.h"
#include "server/messages_front_end.h"

namespace invar::server {
namespace {
// Named apart: the library is built in unity batches, where every file's anonymous namespace
// is the same one.
namespace anthropic_request {

using ojson = nlohmann::ordered_json;

std::string field_of(const std::string& where, const std::string& name) {
  return where.empty() ? name : where + "." + name;
}

// A 400 naming the first member of `o` that is not in `known`.
void keys_check(const ojson& o, const std::string& where, std::initializer_list<const char*> known,
                const char* what) {
  for (const auto& [k, v] : o.items()) {
    if (std::any_of(known.begin(), known.end(), [&k](const char* n) { return k == n; })) continue;
    std::string list;
    for (const char* n : known) list += std::string(list.empty() ? "" : ", ") + n;
    const std::string field = field_of(where, k);
    throw bad_request(field,
                      "unknown field '" + echo_cut(field) + "' for " + what + " (" + list + ")");
  }
}

const std::string& string_member(const ojson& o, const char* name, const std::string& where) {
  const std::string field = field_of(where, name);
  const ojson* v = json_member(o, name);
  if (!v) throw bad_request(field, "'" + field + "' is required");
  if (!v->is_string()) json_wrong_type(field, "a string", *v);
  return v->get_ref<const std::string&>();
}

// cache_control marks a prefix for Anthropic's explicit cache; invar caches every prefix by
// itself, so the mark changes nothing. Its shape is still checked.
void cache_control_check(const ojson& block, const std::string& where) {
  if (const ojson* c = json_member(block, "cache_control"); c && !c->is_object())
    json_wrong_type(where + ".cache_control", "an object", *c);
}

const std::string& block_type(const ojson& block, const std::string& where) {
  if (!block.is_object()) json_wrong_type(where, "an object (a content block)", block);
  return string_member(block, "type", where);
}

ojson text_part(const ojson& block, const std::string& where) {
  keys_check(block, where, {"type", "text", "cache_control", "citations"}, "a text block");
  cache_control_check(block, where);
  // Citations annotate a text an API returned; the text alone is the conversation.
  if (const ojson* c = json_member(block, "citations"); c && !c->is_array())
    json_wrong_type(where + ".citations", "an array", *c);
  return {{"type", "text"}, {"text", string_member(block, "text", where)}};
}

// {"type": "image", "source": {"type": "base64", "media_type", "data"} | {"type": "url", "url"}}
ojson image_part(const ojson& block, const std::string& where, bool count) {
  keys_check(block, where, {"type", "source", "cache_control"}, "an image block");
  cache_control_check(block, where);
  // An image's token count is its decoded size's, which /tokenize does not decode.
  if (count)
    throw bad_request(where,
                      "count_tokens does not read images; a message's usage.input_tokens "
                      "counts an image's tokens");
  const std::string sw = where + ".source";
  const ojson* s = json_member(block, "source");
  if (!s) throw bad_request(sw, "'" + sw + "' is required");
  if (!s->is_object()) json_wrong_type(sw, "an object", *s);
  const std::string& type = string_member(*s, "type", sw);
  std::string url;
  if (type == "base64") {
    keys_check(*s, sw, {"type", "media_type", "data"}, "a base64 image source");
    url =
        "data:" + string_member(*s, "media_type", sw) + ";base64," + string_member(*s, "data", sw);
  } else if (type == "url") {
    keys_check(*s, sw, {"type", "url"}, "a url image source");
    url = string_member(*s, "url", sw);
  } else {
    throw bad_request(sw + ".type", "image sources of type '" + echo_cut(type) +
                                        "' are not supported (base64, url)");
  }
  return {{"type", "image_url"}, {"image_url", {{"url", std::move(url)}}}};
}

// A tool_result block as a "tool" message.
ojson tool_message(const ojson& block, const std::string& where, bool count) {
  keys_check(block, where, {"type", "tool_use_id", "content", "is_error", "cache_control"},
             "a tool_result block");
  cache_control_check(block, where);
  const std::string& id = string_member(block, "tool_use_id", where);
  bool is_error = false;
  if (const ojson* e = json_member(block, "is_error")) {
    if (!e->is_boolean()) json_wrong_type(where + ".is_error", "a boolean", *e);
    is_error = e->get<bool>();
  }
  // A chat tool message has no error flag: the text says it, as an agent framework would.
  const std::string mark = is_error ? "Error: " : "";
  ojson content;
  const ojson* c = json_member(block, "content");
  const std::string cw = where + ".content";
  if (!c) {
    content = mark;
  } else if (c->is_string()) {
    content = mark + c->get<std::string>();
  } else if (c->is_array()) {
    content = ojson::array();
    for (size_t i = 0; i < c->size(); ++i) {
      const std::string bw = cw + "[" + std::to_string(i) + "]";
      const std::string& type = block_type((*c)[i], bw);
      if (type == "text")
        content.push_back(text_part((*c)[i], bw));
      else if (type == "image")
        content.push_back(image_part((*c)[i], bw, count));
      else
        throw bad_request(bw + ".type", "tool_result content blocks of type '" + echo_cut(type) +
                                            "' are not supported (text, image)");
    }
    if (is_error) {
      if (!content.empty() && content[0]["type"] == "text")
        content[0]["text"] = mark + content[0]["text"].get<std::string>();
      else
        content.insert(content.begin(), ojson{{"type", "text"}, {"text", mark}});
    }
  } else {
    json_wrong_type(cw, "a string or an array of content blocks", *c);
  }
  return {{"role", "tool"}, {"tool_call_id", id}, {"content", std::move(content)}};
}

// A user turn: its tool results as "tool" messages, its text and images as a user message.
void user_take(const ojson& content, const std::string& where, bool count, ojson& out) {
  if (content.is_string()) {
    out.push_back({{"role", "user"}, {"content", content}});
    return;
  }
  ojson parts = ojson::array();
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string bw = where + "[" + std::to_string(i) + "]";
    const std::string& type = block_type(content[i], bw);
    if (type == "text") {
      parts.push_back(text_part(content[i], bw));
    } else if (type == "image") {
      parts.push_back(image_part(content[i], bw, count));
    } else if (type == "tool_result") {
      // Order is kept: text before a result is a user message before that tool message.
      if (!parts.empty()) out.push_back({{"role", "user"}, {"content", std::move(parts)}});
      parts = ojson::array();
      out.push_back(tool_message(content[i], bw, count));
    } else {
      throw bad_request(bw + ".type", "content blocks of type '" + echo_cut(type) +
                                          "' are not supported in a user message (text, image, "
                                          "tool_result)");
    }
  }
  if (!parts.empty()) out.push_back({{"role", "user"}, {"content", std::move(parts)}});
}

// An assistant turn: text, tool calls and reasoning in one assistant message.
void assistant_take(const ojson& content, const std::string& where, ojson& out) {
  if (content.is_string()) {
    out.push_back({{"role", "assistant"}, {"content", content}});
    return;
  }
  ojson parts = ojson::array(), calls = ojson::array();
  std::string reasoning;
  for (size_t i = 0; i < content.size(); ++i) {
    const ojson& b = content[i];
    const std::string bw = where + "[" + std::to_string(i) + "]";
    const std::string& type = block_type(b, bw);
    if (type == "text") {
      parts.push_back(text_part(b, bw));
    } else if (type == "tool_use") {
      keys_check(b, bw, {"type", "id", "name", "input", "cache_control"}, "a tool_use block");
      cache_control_check(b, bw);
      const ojson* input = json_member(b, "input");
      if (!input) throw bad_request(bw + ".input", "'" + bw + ".input' is required");
      if (!input->is_object()) json_wrong_type(bw + ".input", "an object", *input);
      calls.push_back(
          {{"id", string_member(b, "id", bw)},
           {"type", "function"},
           {"function",
            {{"name", string_member(b, "name", bw)}, {"arguments", json_text(*input)}}}});
    } else if (type == "thinking") {
      keys_check(b, bw, {"type", "thinking", "signature", "cache_control"}, "a thinking block");
      reasoning += string_member(b, "thinking", bw);
    } else if (type == "redacted_thinking") {
      // Another model's reasoning, encrypted: no template can render it.
      keys_check(b, bw, {"type", "data", "cache_control"}, "a redacted_thinking block");
      string_member(b, "data", bw);
    } else {
      throw bad_request(bw + ".type", "content blocks of type '" + echo_cut(type) +
                                          "' are not supported in an assistant message (text, "
                                          "tool_use, thinking, redacted_thinking)");
    }
  }
  ojson m = {{"role", "assistant"}};
  if (!parts.empty())
    m["content"] = std::move(parts);
  else
    m["content"] = calls.empty() ? ojson("") : ojson(nullptr);  // as OpenAI beside tool calls
  if (!calls.empty()) m["tool_calls"] = std::move(calls);
  if (!reasoning.empty()) m["reasoning_content"] = std::move(reasoning);
  out.push_back(std::move(m));
}

ojson messages_translate(const ojson& body, bool count) {
  ojson out = ojson::array();
  if (const ojson* s = json_member(body, "system")) {
    if (s->is_string()) {
      out.push_back({{"role", "system"}, {"content", *s}});
    } else if (s->is_array()) {
      ojson parts = ojson::array();
      for (size_t i = 0; i < s->size(); ++i) {
        const std::string bw = "system[" + std::to_string(i) + "]";
        if (block_type((*s)[i], bw) != "text")
          throw bad_request(bw + ".type", "'" + bw + ".type' must be \"text\"");
        parts.push_back(text_part((*s)[i], bw));
      }
      out.push_back({{"role", "system"}, {"content", std::move(parts)}});
    } else {
      json_wrong_type("system", "a string or an array of text blocks", *s);
    }
  }
  const ojson* ms = json_member(body, "messages");
  if (!ms) throw bad_request("messages", "'messages' is required");
  if (!ms->is_array()) json_wrong_type("messages", "an array", *ms);
  if (ms->empty()) throw bad_request("messages", "'messages' must not be empty");
  for (size_t i = 0; i < ms->size(); ++i) {
    const ojson& m = (*ms)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) json_wrong_type(where, "an object", m);
    keys_check(m, where, {"role", "content"}, "a message");
    const std::string& role = string_member(m, "role", where);
    const ojson* content = json_member(m, "content");
    const std::string cw = where + ".content";
    if (!content) throw bad_request(cw, "'" + cw + "' is required");
    if (!content->is_string() && !content->is_array())
      json_wrong_type(cw, "a string or an array of content blocks", *content);
    if (content->is_array() && content->empty())
      throw bad_request(cw, "'" + cw + "' must not be empty");
    if (role == "user")
      user_take(*content, cw, count, out);
    else if (role == "assistant")
      assistant_take(*content, cw, out);
    else
      throw bad_request(where + ".role", "'" + where +
                                             ".role' must be \"user\" or \"assistant\", "
                                             "not '" +
                                             echo_cut(role) + "'");
  }
  return out;
}

ojson tools_translate(const ojson& tools) {
  if (!tools.is_array()) json_wrong_type("tools", "an array", tools);
  ojson out = ojson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) json_wrong_type(where, "an object", t);
    // Anthropic's server tools (web search, code execution, …) run on Anthropic's side.
    if (const ojson* type = json_member(t, "type"); type && *type != "custom")
      throw bad_request(where + ".type", "'" + where +
                                             ".type' must be \"custom\" (a client tool): "
                                             "server tools are not available here");
    keys_check(t, where, {"type", "name", "description", "input_schema", "cache_control"},
               "a tool");
    cache_control_check(t, where);
    ojson fn = {{"name", string_member(t, "name", where)}};
    if (const ojson* d = json_member(t, "description")) {
      if (!d->is_string()) json_wrong_type(where + ".description", "a string", *d);
      fn["description"] = *d;
    }
    const ojson* schema = json_member(t, "input_schema");
    if (!schema)
      throw bad_request(where + ".input_schema", "'" + where + ".input_schema' is required");
    if (!schema->is_object())
      json_wrong_type(where + ".input_schema", "an object (a JSON schema)", *schema);
    fn["parameters"] = *schema;
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

void tool_choice_translate(const ojson& tc, ojson& chat) {
  if (!tc.is_object()) json_wrong_type("tool_choice", "an object", tc);
  const std::string& type = string_member(tc, "type", "tool_choice");
  if (type == "none") {
    keys_check(tc, "tool_choice", {"type"}, "tool_choice none");
    chat["tool_choice"] = "none";
    return;
  }
  if (type == "tool") {
    keys_check(tc, "tool_choice", {"type", "name", "disable_parallel_tool_use"},
               "tool_choice tool");
    chat["tool_choice"] = {{"type", "function"},
                           {"function", {{"name", string_member(tc, "name", "tool_choice")}}}};
  } else if (type == "auto" || type == "any") {
    keys_check(tc, "tool_choice", {"type", "disable_parallel_tool_use"},
               ("tool_choice " + type).c_str());
    chat["tool_choice"] = type == "auto" ? "auto" : "required";
  } else {
    throw bad_request(
        "tool_choice.type",
        "'tool_choice.type' must be auto, any, tool or none, not '" + echo_cut(type) + "'");
  }
  if (const ojson* d = json_member(tc, "disable_parallel_tool_use")) {
    if (!d->is_boolean()) json_wrong_type("tool_choice.disable_parallel_tool_use", "a boolean", *d);
    chat["parallel_tool_calls"] = !d->get<bool>();
  }
}

// thinking → the template's thinking switch. budget_tokens is checked but bounds nothing more
// than max_tokens does: invar has no separate budget for the thought.
void thinking_translate(const ojson& t, ojson& chat) {
  if (!t.is_object()) json_wrong_type("thinking", "an object", t);
  const std::string& type = string_member(t, "type", "thinking");
  bool on = true;
  if (type == "enabled") {
    keys_check(t, "thinking", {"type", "budget_tokens"}, "thinking enabled");
    const ojson* b = json_member(t, "budget_tokens");
    if (!b) throw bad_request("thinking.budget_tokens", "'thinking.budget_tokens' is required");
    if (!b->is_number_integer() || b->get<int64_t>() < 1)
      throw bad_request("thinking.budget_tokens",
                        "'thinking.budget_tokens' must be a positive integer");
  } else if (type == "adaptive") {
    keys_check(t, "thinking", {"type"}, "thinking adaptive");
  } else if (type == "disabled") {
    keys_check(t, "thinking", {"type"}, "thinking disabled");
    on = false;
  } else {
    throw bad_request(
        "thinking.type",
        "'thinking.type' must be enabled, adaptive or disabled, not '" + echo_cut(type) + "'");
  }
  chat["chat_template_kwargs"] = {{"enable_thinking", on}};
}

const ojson& number_member(const ojson& body, const char* name) {
  const ojson& v = body[name];
  if (!v.is_number()) json_wrong_type(name, "a number", v);
  return v;
}

ojson chat_body_translate(std::string_view text, bool count) {
  const ojson body = json_body_parse(text);
  if (count)
    keys_check(body, "", {"model", "messages", "system", "tools", "tool_choice", "thinking"},
               "/v1/messages/count_tokens");
  else
    keys_check(body, "",
               {"model", "messages", "system", "max_tokens", "metadata", "stop_sequences", "stream",
                "temperature", "top_p", "top_k", "tools", "tool_choice", "thinking"},
               "/v1/messages");
  ojson chat = {{"model", string_member(body, "model", "")}};
  chat["messages"] = messages_translate(body, count);
  // A final assistant turn is a prefill: the answer continues it.
  if (chat["messages"].back()["role"] == "assistant") chat["continue_final_message"] = true;
  if (const ojson* t = json_member(body, "tools")) chat["tools"] = tools_translate(*t);
  if (const ojson* tc = json_member(body, "tool_choice")) tool_choice_translate(*tc, chat);
  if (const ojson* t = json_member(body, "thinking")) thinking_translate(*t, chat);
  if (count) return chat;
  const ojson* max = json_member(body, "max_tokens");
  if (!max) throw bad_request("max_tokens", "'max_tokens' is required");
  if (!max->is_number_integer() || max->get<int64_t>() < 1)
    throw bad_request("max_tokens", "'max_tokens' must be a positive integer");
  chat["max_tokens"] = *max;
  if (json_member(body, "temperature")) {
    const double t = number_member(body, "temperature").get<double>();
    if (!(t >= 0 && t <= 1))
      throw bad_request("temperature", "'temperature' must be in [0, 1] (Anthropic's range)");
    chat["temperature"] = body["temperature"];
  }
  if (json_member(body, "top_p")) chat["top_p"] = number_member(body, "top_p");
  if (const ojson* k = json_member(body, "top_k")) {
    if (!k->is_number_integer() || k->get<int64_t>() < 0)
      throw bad_request("top_k", "'top_k' must be a non-negative integer");
    chat["top_k"] = *k;
  }
  if (const ojson* s = json_member(body, "stop_sequences")) {
    if (!s->is_array()) json_wrong_type("stop_sequences", "an array of strings", *s);
    for (size_t i = 0; i < s->size(); ++i)
      if (!(*s)[i].is_string())
        json_wrong_type("stop_sequences[" + std::to_string(i) + "]", "a string", (*s)[i]);
    if (!s->empty()) chat["stop"] = *s;
  }
  if (const ojson* m = json_member(body, "metadata")) {
    if (!m->is_object()) json_wrong_type("metadata", "an object", *m);
    keys_check(*m, "metadata", {"user_id"}, "metadata");
    if (const ojson* u = json_member(*m, "user_id")) {
      if (!u->is_string()) json_wrong_type("metadata.user_id", "a string", *u);
      chat["user"] = *u;
    }
  }
  if (const ojson* s = json_member(body, "stream")) {
    if (!s->is_boolean()) json_wrong_type("stream", "a boolean", *s);
    if (s->get<bool>()) {
      chat["stream"] = true;
      chat["stream_options"] = {{"include_usage", true}};  // message_delta carries the usage
    }
  }
  return chat;
}

}  // namespace anthropic_request
}  // namespace

nlohmann::ordered_json messages_chat_body(std::string_view text, bool count) {
  return anthropic_request::chat_body_translate(text, count);
}

}  // namespace invar::server
