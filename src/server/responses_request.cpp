#include "server/responses_request.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "server/api_error.h"
#include "server/api_response.h"
#include "server/json_fields.h"

namespace invar::server {
namespace {

using ojson = nlohmann::ordered_json;

// Every field of OpenAI's request that invar reads or refuses by name; anything else is a 400.
const std::set<std::string> kFields = {"model",
                                       "input",
                                       "instructions",
                                       "tools",
                                       "tool_choice",
                                       "parallel_tool_calls",
                                       "text",
                                       "reasoning",
                                       "max_output_tokens",
                                       "temperature",
                                       "top_p",
                                       "top_logprobs",
                                       "include",
                                       "metadata",
                                       "user",
                                       "prompt_cache_key",
                                       "safety_identifier",
                                       "service_tier",
                                       "stream",
                                       "stream_options",
                                       "store",
                                       "previous_response_id",
                                       "background",
                                       "truncation"};

}  // namespace

namespace {

std::string string_at(const ojson& o, const char* k, const std::string& where) {
  const ojson* v = json_member(o, k);
  if (!v) throw bad_request(where + "." + k, "'" + where + "." + k + "' is required");
  if (!v->is_string()) json_wrong_type(where + "." + k, "a string", *v);
  return v->get<std::string>();
}

// The text of a reasoning item's parts (summary_text, reasoning_text), or the string itself.
// Any other part is a 400 naming it.
std::string parts_text(const ojson& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) json_wrong_type(where, "a string or an array of parts", content);
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string w = where + "[" + std::to_string(j) + "]";
    const ojson& part = content[j];
    if (!part.is_object()) json_wrong_type(w, "an object", part);
    const std::string type = string_at(part, "type", w);
    if (type != "input_text" && type != "output_text" && type != "summary_text" &&
        type != "reasoning_text")
      throw bad_request(w + ".type", "the part type '" + echo_cut(type) +
                                         "' is not supported in '" + where + "' (text parts only)");
    text += string_at(part, "text", w);
  }
  return text;
}

// A message's content parts as chat parts: input_text, output_text → text, input_image →
// image_url (the chat's own rules say which roles may hold images).
ojson chat_content(const ojson& content, const std::string& where) {
  if (content.is_string()) return content;
  if (!content.is_array()) json_wrong_type(where, "a string or an array of parts", content);
  ojson parts = ojson::array();
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string w = where + "[" + std::to_string(j) + "]";
    const ojson& part = content[j];
    if (!part.is_object()) json_wrong_type(w, "an object", part);
    const std::string type = string_at(part, "type", w);
    if (type == "input_text" || type == "output_text") {
      parts.push_back({{"type", "text"}, {"text", string_at(part, "text", w)}});
    } else if (type == "input_image") {
      if (json_member(part, "file_id"))
        throw bad_request(w + ".file_id",
                          "invar has no files API: send the image as image_url (a data: URL)");
      ojson url = {{"url", string_at(part, "image_url", w)}};
      if (const ojson* d = json_member(part, "detail")) url["detail"] = *d;
      parts.push_back({{"type", "image_url"}, {"image_url", std::move(url)}});
    } else {
      throw bad_request(w + ".type", "the part type '" + echo_cut(type) +
                                         "' is not supported (input_text, input_image)");
    }
  }
  return parts;
}

// Input items as chat messages. Consecutive reasoning, assistant message and function_call
// items make one assistant message (its reasoning_content, content and tool_calls), as a chat
// turn holds them.
void items_to_messages(const ojson& items, const std::string& where, ojson& messages) {
  std::ptrdiff_t turn = -1;  // the assistant message the items so far have built
  auto assistant = [&]() -> ojson& {
    if (turn < 0 || turn != std::ptrdiff_t(messages.size()) - 1) {
      messages.push_back({{"role", "assistant"}, {"content", nullptr}});
      turn = std::ptrdiff_t(messages.size()) - 1;
    }
    return messages[size_t(turn)];
  };
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string w = where + "[" + std::to_string(i) + "]";
    const ojson& it = items[i];
    if (!it.is_object()) json_wrong_type(w, "an object", it);
    const ojson* t = json_member(it, "type");
    if (t && !t->is_string()) json_wrong_type(w + ".type", "a string", *t);
    const std::string type = t ? t->get<std::string>() : "message";
    if (type == "message") {
      const std::string role = string_at(it, "role", w);
      const ojson* content = json_member(it, "content");
      if (!content) throw bad_request(w + ".content", "'" + w + ".content' is required");
      if (role == "assistant") {
        ojson& a = assistant();
        if (!a["content"].is_null() || a.contains("tool_calls")) {
          turn = -1;
          assistant();
        }
        messages.back()["content"] = chat_content(*content, w + ".content");
        continue;
      }
      if (role != "user" && role != "system" && role != "developer")
        throw bad_request(w + ".role", "the role '" + echo_cut(role) +
                                           "' is not supported (user, assistant, system, "
                                           "developer)");
      messages.push_back({{"role", role}, {"content", chat_content(*content, w + ".content")}});
    } else if (type == "function_call") {
      ojson call = {
          {"id", string_at(it, "call_id", w)},
          {"type", "function"},
          {"function",
           {{"name", string_at(it, "name", w)}, {"arguments", string_at(it, "arguments", w)}}}};
      ojson& a = assistant();
      if (!a.contains("tool_calls")) a["tool_calls"] = ojson::array();
      a["tool_calls"].push_back(std::move(call));
    } else if (type == "function_call_output") {
      const ojson* out = json_member(it, "output");
      if (!out) throw bad_request(w + ".output", "'" + w + ".output' is required");
      messages.push_back({{"role", "tool"},
                          {"tool_call_id", string_at(it, "call_id", w)},
                          {"content", chat_content(*out, w + ".output")}});
    } else if (type == "reasoning") {
      std::string text;
      if (const ojson* c = json_member(it, "content")) text = parts_text(*c, w + ".content");
      if (text.empty())
        if (const ojson* s = json_member(it, "summary")) text = parts_text(*s, w + ".summary");
      ojson& a = assistant();
      if (!a["content"].is_null() || a.contains("tool_calls") || a.contains("reasoning_content")) {
        turn = -1;
        assistant();
      }
      messages.back()["reasoning_content"] = text;
    } else {
      throw bad_request(w + ".type", "the input item type '" + echo_cut(type) +
                                         "' is not supported (message, function_call, "
                                         "function_call_output, reasoning, item_reference)");
    }
  }
}

// Responses' function tools as chat tools; any other tool type is a 400 naming it.
ojson chat_tools(const ojson& tools) {
  if (!tools.is_array()) json_wrong_type("tools", "an array", tools);
  ojson out = ojson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string w = "tools[" + std::to_string(i) + "]";
    const ojson& t = tools[i];
    if (!t.is_object()) json_wrong_type(w, "an object", t);
    const std::string type = string_at(t, "type", w);
    if (type != "function")
      throw bad_request(w + ".type", "the tool type '" + echo_cut(type) +
                                         "' is not supported: invar runs function tools only "
                                         "(the client runs them); hosted tools need OpenAI");
    ojson fn = {{"name", string_at(t, "name", w)}};
    for (const char* k : {"description", "parameters", "strict"})
      if (const ojson* v = json_member(t, k)) fn[k] = *v;
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

ojson chat_tool_choice(const ojson& c) {
  if (c.is_string()) return c;
  if (!c.is_object()) json_wrong_type("tool_choice", "a string or an object", c);
  const std::string type = string_at(c, "type", "tool_choice");
  if (type != "function")
    throw bad_request("tool_choice.type", "tool_choice type '" + echo_cut(type) +
                                              "' is not supported (function, or the strings "
                                              "none, auto, required)");
  return {{"type", "function"}, {"function", {{"name", string_at(c, "name", "tool_choice")}}}};
}

// text.format as the chat's response_format.
ojson chat_response_format(const ojson& text) {
  if (!text.is_object()) json_wrong_type("text", "an object", text);
  for (auto& [k, v] : text.items()) {
    if (k == "verbosity" && !v.is_null())
      throw bad_request("text.verbosity", "text.verbosity is for OpenAI's reasoning models");
    if (k != "format" && k != "verbosity")
      throw bad_request("text." + k, "unknown field 'text." + echo_cut(k) + "' (format)");
  }
  const ojson* f = json_member(text, "format");
  if (!f) return nullptr;
  if (!f->is_object()) json_wrong_type("text.format", "an object", *f);
  const std::string type = string_at(*f, "type", "text.format");
  if (type == "text") return nullptr;
  if (type == "json_object") return {{"type", "json_object"}};
  if (type != "json_schema")
    throw bad_request("text.format.type", "text.format type '" + echo_cut(type) +
                                              "' is not supported (text, json_object, "
                                              "json_schema)");
  ojson js = {{"name", string_at(*f, "name", "text.format")}};
  const ojson* schema = json_member(*f, "schema");
  if (!schema) throw bad_request("text.format.schema", "'text.format.schema' is required");
  js["schema"] = *schema;
  for (const char* k : {"description", "strict"})
    if (const ojson* v = json_member(*f, k)) js[k] = *v;
  return {{"type", "json_schema"}, {"json_schema", std::move(js)}};
}

// item's id is its kind, its response's id and its index (rs_HEX_2 is output[2] of resp_HEX), so
// no index of items is kept. 404 when that response is not stored (or is another tenant's).
ojson item_referenced(const ojson& ref, const std::string& where, ResponseStore* store,
                      const std::string& tenant) {
  const std::string id = string_at(ref, "id", where);
  const size_t kind = id.find('_'), index = id.rfind('_');
  std::shared_ptr<const StoredResponse> s;
  if (store && kind != std::string::npos && index > kind)
    s = store->get(tenant, "resp_" + id.substr(kind + 1, index - kind - 1));
  if (s) {
    const ojson& output = s->response["output"];
    const std::string n = id.substr(index + 1);
    const size_t i = n.empty() || n.size() > 6 || n.find_first_not_of("0123456789") != n.npos
                         ? output.size()
                         : size_t(std::stoul(n));
    if (i < output.size() && output[i].value("id", "") == id) return output[i];
  }
  ApiError e = not_found("Item with id '" + echo_cut(id) +
                             "' not found (items are found in the "
                             "stored responses, --response-store-bytes)",
                         "not_found");
  e.param = where + ".id";
  throw e;
}

}  // namespace

ResponsesRequest responses_request_translate(std::string_view body, ResponseStore* store,
                                             const std::string& tenant) {
  ResponsesRequest t;
  t.req = json_body_parse(body);
  const ojson& r = t.req;
  for (auto& [k, v] : r.items())
    if (!kFields.count(k))
      throw bad_request(k, "unknown field '" + echo_cut(k) +
                               "': invar refuses fields it does not implement (docs/api.md)");
  if (const ojson* v = json_member(r, "background"); v && *v != false)
    throw bad_request("background",
                      "invar does not run background responses: send background false (or "
                      "omit it) and keep the connection open, or stream");
  if (const ojson* v = json_member(r, "truncation"); v && *v != "disabled")
    throw bad_request("truncation",
                      "only truncation 'disabled' is implemented: a prompt over the "
                      "context is a 400, never cut");
  if (const ojson* v = json_member(r, "store")) {
    if (!v->is_boolean()) json_wrong_type("store", "a boolean", *v);
    t.store = v->get<bool>();
  }
  ojson& chat = t.chat;
  chat = ojson::object();
  if (const ojson* v = json_member(r, "model")) chat["model"] = *v;
  ojson messages = ojson::array();
  if (const ojson* v = json_member(r, "instructions")) {
    if (!v->is_string()) json_wrong_type("instructions", "a string", *v);
    messages.push_back({{"role", "system"}, {"content", *v}});
  }
  t.conversation = ojson::array();
  if (const ojson* v = json_member(r, "previous_response_id")) {
    if (!v->is_string()) json_wrong_type("previous_response_id", "a string", *v);
    auto prev = store ? store->get(tenant, v->get<std::string>()) : nullptr;
    if (!prev) {
      ApiError e = not_found("no stored response has the id '" + echo_cut(v->get<std::string>()) +
                                 "' (stored responses are kept in memory, bounded by "
                                 "--response-store-bytes)",
                             "previous_response_not_found");
      e.param = "previous_response_id";
      throw e;
    }
    t.conversation = prev->conversation;
    items_to_messages(t.conversation, "previous_response_id", messages);
  }
  const ojson* input = json_member(r, "input");
  if (!input) throw bad_request("input", "'input' is required");
  ojson items = input->is_string()
                    ? ojson::array({{{"type", "message"}, {"role", "user"}, {"content", *input}}})
                    : *input;
  if (!items.is_array()) json_wrong_type("input", "a string or an array of items", *input);
  for (size_t i = 0; i < items.size(); ++i)
    if (const ojson* t = items[i].is_object() ? json_member(items[i], "type") : nullptr;
        t && *t == "item_reference")
      items[i] = item_referenced(items[i], "input[" + std::to_string(i) + "]", store, tenant);
  items_to_messages(items, "input", messages);
  for (auto& it : items) t.conversation.push_back(it);
  chat["messages"] = std::move(messages);

  if (const ojson* v = json_member(r, "tools"); v && !v->empty()) chat["tools"] = chat_tools(*v);
  if (const ojson* v = json_member(r, "tool_choice")) chat["tool_choice"] = chat_tool_choice(*v);
  for (const char* k : {"parallel_tool_calls", "temperature", "top_p", "metadata", "user",
                        "prompt_cache_key", "safety_identifier", "service_tier"})
    if (const ojson* v = json_member(r, k)) chat[k] = *v;
  if (const ojson* v = json_member(r, "max_output_tokens")) chat["max_tokens"] = *v;
  if (const ojson* v = json_member(r, "text"))
    if (ojson f = chat_response_format(*v); !f.is_null()) chat["response_format"] = std::move(f);
  if (const ojson* v = json_member(r, "reasoning")) {
    if (!v->is_object()) json_wrong_type("reasoning", "an object", *v);
    for (auto& [k, x] : v->items())
      if (k != "effort" && k != "summary" && k != "generate_summary")
        throw bad_request("reasoning." + k,
                          "unknown field 'reasoning." + echo_cut(k) + "' (effort, summary)");
    if (const ojson* e = json_member(*v, "effort")) chat["reasoning_effort"] = *e;
  }
  bool logprobs = false;
  if (const ojson* v = json_member(r, "include")) {
    if (!v->is_array()) json_wrong_type("include", "an array", *v);
    for (const ojson& x : *v) {
      if (x == "message.output_text.logprobs") {
        logprobs = true;
      } else {
        throw bad_request("include", "include " + echo_cut(x.dump()) +
                                         " is not supported (message.output_text.logprobs)");
      }
    }
  }
  if (const ojson* v = json_member(r, "top_logprobs")) {
    chat["top_logprobs"] = *v;
    logprobs = true;
  }
  if (logprobs) chat["logprobs"] = true;
  if (const ojson* v = json_member(r, "stream_options")) {
    if (!v->is_object()) json_wrong_type("stream_options", "an object", *v);
    for (auto& [k, x] : v->items())
      if (k != "include_obfuscation")
        throw bad_request("stream_options." + k, "unknown field 'stream_options." + echo_cut(k) +
                                                     "' (include_obfuscation)");
  }
  if (const ojson* v = json_member(r, "stream")) {
    chat["stream"] = *v;
    if (*v == true) chat["stream_options"] = {{"include_usage", true}};
  }
  return t;
}

}  // namespace invar::server
