#include "server/responses_front_end.h"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <random>
#include <set>

#include "server/api_response.h"

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

const ojson* member(const ojson& o, const char* k) {
  auto it = o.find(k);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

[[noreturn]] void wrong_type(const std::string& field, const char* want, const ojson& v) {
  throw bad_request(field, "'" + field + "' must be " + want + ", got " + echo_cut(v.dump()));
}

std::string string_at(const ojson& o, const char* k, const std::string& where) {
  const ojson* v = member(o, k);
  if (!v) throw bad_request(where + "." + k, "'" + where + "." + k + "' is required");
  if (!v->is_string()) wrong_type(where + "." + k, "a string", *v);
  return v->get<std::string>();
}

std::string random_hex(size_t bytes) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < bytes; ++i) {
    const unsigned b = unsigned(rng() & 0xff);
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

// The text of a reasoning item's parts (summary_text, reasoning_text), or the string itself.
// Any other part is a 400 naming it.
std::string parts_text(const ojson& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) wrong_type(where, "a string or an array of parts", content);
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string w = where + "[" + std::to_string(j) + "]";
    const ojson& part = content[j];
    if (!part.is_object()) wrong_type(w, "an object", part);
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
  if (!content.is_array()) wrong_type(where, "a string or an array of parts", content);
  ojson parts = ojson::array();
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string w = where + "[" + std::to_string(j) + "]";
    const ojson& part = content[j];
    if (!part.is_object()) wrong_type(w, "an object", part);
    const std::string type = string_at(part, "type", w);
    if (type == "input_text" || type == "output_text") {
      parts.push_back({{"type", "text"}, {"text", string_at(part, "text", w)}});
    } else if (type == "input_image") {
      if (member(part, "file_id"))
        throw bad_request(w + ".file_id",
                          "invar has no files API: send the image as image_url (a data: URL)");
      ojson url = {{"url", string_at(part, "image_url", w)}};
      if (const ojson* d = member(part, "detail")) url["detail"] = *d;
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
    if (!it.is_object()) wrong_type(w, "an object", it);
    const ojson* t = member(it, "type");
    if (t && !t->is_string()) wrong_type(w + ".type", "a string", *t);
    const std::string type = t ? t->get<std::string>() : "message";
    if (type == "message") {
      const std::string role = string_at(it, "role", w);
      const ojson* content = member(it, "content");
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
      const ojson* out = member(it, "output");
      if (!out) throw bad_request(w + ".output", "'" + w + ".output' is required");
      messages.push_back({{"role", "tool"},
                          {"tool_call_id", string_at(it, "call_id", w)},
                          {"content", chat_content(*out, w + ".output")}});
    } else if (type == "reasoning") {
      std::string text;
      if (const ojson* c = member(it, "content")) text = parts_text(*c, w + ".content");
      if (text.empty())
        if (const ojson* s = member(it, "summary")) text = parts_text(*s, w + ".summary");
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
  if (!tools.is_array()) wrong_type("tools", "an array", tools);
  ojson out = ojson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string w = "tools[" + std::to_string(i) + "]";
    const ojson& t = tools[i];
    if (!t.is_object()) wrong_type(w, "an object", t);
    const std::string type = string_at(t, "type", w);
    if (type != "function")
      throw bad_request(w + ".type", "the tool type '" + echo_cut(type) +
                                         "' is not supported: invar runs function tools only "
                                         "(the client runs them); hosted tools need OpenAI");
    ojson fn = {{"name", string_at(t, "name", w)}};
    for (const char* k : {"description", "parameters", "strict"})
      if (const ojson* v = member(t, k)) fn[k] = *v;
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

ojson chat_tool_choice(const ojson& c) {
  if (c.is_string()) return c;
  if (!c.is_object()) wrong_type("tool_choice", "a string or an object", c);
  const std::string type = string_at(c, "type", "tool_choice");
  if (type != "function")
    throw bad_request("tool_choice.type", "tool_choice type '" + echo_cut(type) +
                                              "' is not supported (function, or the strings "
                                              "none, auto, required)");
  return {{"type", "function"}, {"function", {{"name", string_at(c, "name", "tool_choice")}}}};
}

// text.format as the chat's response_format.
ojson chat_response_format(const ojson& text) {
  if (!text.is_object()) wrong_type("text", "an object", text);
  for (auto& [k, v] : text.items()) {
    if (k == "verbosity" && !v.is_null())
      throw bad_request("text.verbosity", "text.verbosity is for OpenAI's reasoning models");
    if (k != "format" && k != "verbosity")
      throw bad_request("text." + k, "unknown field 'text." + echo_cut(k) + "' (format)");
  }
  const ojson* f = member(text, "format");
  if (!f) return nullptr;
  if (!f->is_object()) wrong_type("text.format", "an object", *f);
  const std::string type = string_at(*f, "type", "text.format");
  if (type == "text") return nullptr;
  if (type == "json_object") return {{"type", "json_object"}};
  if (type != "json_schema")
    throw bad_request("text.format.type", "text.format type '" + echo_cut(type) +
                                              "' is not supported (text, json_object, "
                                              "json_schema)");
  ojson js = {{"name", string_at(*f, "name", "text.format")}};
  const ojson* schema = member(*f, "schema");
  if (!schema) throw bad_request("text.format.schema", "'text.format.schema' is required");
  js["schema"] = *schema;
  for (const char* k : {"description", "strict"})
    if (const ojson* v = member(*f, k)) js[k] = *v;
  return {{"type", "json_schema"}, {"json_schema", std::move(js)}};
}

// OpenAI's logprobs entry without invar's extras.
ojson logprob_entry(const ojson& e) {
  ojson out = {{"token", e.value("token", "")},
               {"logprob", e.value("logprob", 0.0)},
               {"bytes", e.value("bytes", ojson::array())}};
  if (auto t = e.find("top_logprobs"); t != e.end() && t->is_array()) {
    ojson top = ojson::array();
    for (const ojson& x : *t)
      top.push_back({{"token", x.value("token", "")},
                     {"logprob", x.value("logprob", 0.0)},
                     {"bytes", x.value("bytes", ojson::array())}});
    out["top_logprobs"] = std::move(top);
  } else {
    out["top_logprobs"] = ojson::array();
  }
  return out;
}

// The output item an item_reference names, from the stored response that holds it: an output
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

// The request: its fields checked, its items as chat messages.
struct Translated {
  ojson req;           // the Responses body
  ojson conversation;  // previous items, then this input's
  ojson chat;          // the chat body
  bool store = true;
};

Translated translate(std::string_view body, ResponseStore* store, const std::string& tenant) {
  Translated t;
  t.req = ojson::parse(body, nullptr, false);
  if (t.req.is_discarded()) throw bad_request("", "the body is not valid JSON");
  if (!t.req.is_object()) throw bad_request("", "the body must be a JSON object");
  const ojson& r = t.req;
  for (auto& [k, v] : r.items())
    if (!kFields.count(k))
      throw bad_request(k, "unknown field '" + echo_cut(k) +
                               "': invar refuses fields it does not implement (docs/api.md)");
  if (const ojson* v = member(r, "background"); v && *v != false)
    throw bad_request("background",
                      "invar does not run background responses: send background false (or "
                      "omit it) and keep the connection open, or stream");
  if (const ojson* v = member(r, "truncation"); v && *v != "disabled")
    throw bad_request("truncation",
                      "only truncation 'disabled' is implemented: a prompt over the "
                      "context is a 400, never cut");
  if (const ojson* v = member(r, "store")) {
    if (!v->is_boolean()) wrong_type("store", "a boolean", *v);
    t.store = v->get<bool>();
  }
  ojson& chat = t.chat;
  chat = ojson::object();
  if (const ojson* v = member(r, "model")) chat["model"] = *v;
  ojson messages = ojson::array();
  if (const ojson* v = member(r, "instructions")) {
    if (!v->is_string()) wrong_type("instructions", "a string", *v);
    messages.push_back({{"role", "system"}, {"content", *v}});
  }
  t.conversation = ojson::array();
  if (const ojson* v = member(r, "previous_response_id")) {
    if (!v->is_string()) wrong_type("previous_response_id", "a string", *v);
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
  const ojson* input = member(r, "input");
  if (!input) throw bad_request("input", "'input' is required");
  ojson items = input->is_string()
                    ? ojson::array({{{"type", "message"}, {"role", "user"}, {"content", *input}}})
                    : *input;
  if (!items.is_array()) wrong_type("input", "a string or an array of items", *input);
  for (size_t i = 0; i < items.size(); ++i)
    if (const ojson* t = items[i].is_object() ? member(items[i], "type") : nullptr;
        t && *t == "item_reference")
      items[i] = item_referenced(items[i], "input[" + std::to_string(i) + "]", store, tenant);
  items_to_messages(items, "input", messages);
  for (auto& it : items) t.conversation.push_back(it);
  chat["messages"] = std::move(messages);

  if (const ojson* v = member(r, "tools"); v && !v->empty()) chat["tools"] = chat_tools(*v);
  if (const ojson* v = member(r, "tool_choice")) chat["tool_choice"] = chat_tool_choice(*v);
  for (const char* k : {"parallel_tool_calls", "temperature", "top_p", "metadata", "user",
                        "prompt_cache_key", "safety_identifier", "service_tier"})
    if (const ojson* v = member(r, k)) chat[k] = *v;
  if (const ojson* v = member(r, "max_output_tokens")) chat["max_tokens"] = *v;
  if (const ojson* v = member(r, "text"))
    if (ojson f = chat_response_format(*v); !f.is_null()) chat["response_format"] = std::move(f);
  if (const ojson* v = member(r, "reasoning")) {
    if (!v->is_object()) wrong_type("reasoning", "an object", *v);
    for (auto& [k, x] : v->items())
      if (k != "effort" && k != "summary" && k != "generate_summary")
        throw bad_request("reasoning." + k,
                          "unknown field 'reasoning." + echo_cut(k) + "' (effort, summary)");
    if (const ojson* e = member(*v, "effort")) chat["reasoning_effort"] = *e;
  }
  bool logprobs = false;
  if (const ojson* v = member(r, "include")) {
    if (!v->is_array()) wrong_type("include", "an array", *v);
    for (const ojson& x : *v) {
      if (x == "message.output_text.logprobs") {
        logprobs = true;
      } else {
        throw bad_request("include", "include " + echo_cut(x.dump()) +
                                         " is not supported (message.output_text.logprobs)");
      }
    }
  }
  if (const ojson* v = member(r, "top_logprobs")) {
    chat["top_logprobs"] = *v;
    logprobs = true;
  }
  if (logprobs) chat["logprobs"] = true;
  if (const ojson* v = member(r, "stream_options")) {
    if (!v->is_object()) wrong_type("stream_options", "an object", *v);
    for (auto& [k, x] : v->items())
      if (k != "include_obfuscation")
        throw bad_request("stream_options." + k, "unknown field 'stream_options." + echo_cut(k) +
                                                     "' (include_obfuscation)");
  }
  if (const ojson* v = member(r, "stream")) {
    chat["stream"] = *v;
    if (*v == true) chat["stream_options"] = {{"include_usage", true}};
  }
  return t;
}

}  // namespace

ResponsesFrontEnd::ResponsesFrontEnd(ResponseStore* store, std::string tenant)
    : store_(store),
      tenant_(std::move(tenant)),
      id_("resp_" + random_hex(24)),
      created_at_(int64_t(std::time(nullptr))) {}

nlohmann::ordered_json ResponsesFrontEnd::chat_body(std::string_view body) {
  Translated t = translate(body, store_, tenant_);
  req_ = std::move(t.req);
  conversation_ = std::move(t.conversation);
  store_asked_ = t.store;
  const ojson* stream = member(t.chat, "stream");
  streaming_ = stream && *stream == true;  // another type is the chat parser's 400
  if (const ojson* m = member(req_, "model"); m && m->is_string()) model_ = m->get<std::string>();
  return std::move(t.chat);
}

HttpReply ResponsesFrontEnd::error(const ApiError& e) const {
  // The chat's checks name the chat's fields: the client sent the Responses field behind it.
  static const std::pair<const char*, const char*> kChatNames[] = {
      {"max_tokens", "max_output_tokens"},
      {"response_format", "text.format"},
      {"reasoning_effort", "reasoning.effort"},
      {"messages", "input"}};
  ApiError out = e;
  for (const auto& [chat, responses] : kChatNames) {
    const std::string_view p = e.param;
    if (p.rfind(chat, 0) != 0 || (p.size() > std::strlen(chat) && p[std::strlen(chat)] != '.' &&
                                  p[std::strlen(chat)] != '['))
      continue;
    out.param = responses;
    out.message +=
        std::string(" ('") + chat + "' is the chat field '" + responses + "' translates to)";
    break;
  }
  return {out.status, "application/json", out.to_json()};
}

void ResponsesFrontEnd::emit(const char* type, ojson fields) {
  if (!streaming_) return;
  ojson e = {{"type", type}};
  e.update(fields);
  e["sequence_number"] = seq_++;
  out_ += sse_event(type, e);
}

void ResponsesFrontEnd::open(Open kind, ojson item) {
  close();
  open_ = kind;
  text_.clear();
  logprobs_ = ojson::array();
  const int64_t index = int64_t(output_.size());
  const std::string item_id = item["id"];
  output_.push_back(item);
  emit("response.output_item.added", {{"output_index", index}, {"item", std::move(item)}});
  if (kind == Open::message)
    emit("response.content_part.added",
         {{"item_id", item_id},
          {"output_index", index},
          {"content_index", 0},
          {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", ojson::array()}}}});
  if (kind == Open::reasoning)
    emit("response.reasoning_summary_part.added",
         {{"item_id", item_id},
          {"output_index", index},
          {"summary_index", 0},
          {"part", {{"type", "summary_text"}, {"text", ""}}}});
}

void ResponsesFrontEnd::close() {
  if (open_ == Open::none) return;
  const int64_t index = int64_t(output_.size()) - 1;
  ojson& item = output_.back();
  const std::string item_id = item["id"];
  if (open_ == Open::reasoning) {
    ojson part = {{"type", "summary_text"}, {"text", text_}};
    emit("response.reasoning_summary_text.done",
         {{"item_id", item_id}, {"output_index", index}, {"summary_index", 0}, {"text", text_}});
    emit("response.reasoning_summary_part.done",
         {{"item_id", item_id}, {"output_index", index}, {"summary_index", 0}, {"part", part}});
    item["summary"] = ojson::array({part});
  } else if (open_ == Open::message) {
    ojson part = {{"type", "output_text"},
                  {"text", text_},
                  {"annotations", ojson::array()},
                  {"logprobs", logprobs_}};
    emit("response.output_text.done", {{"item_id", item_id},
                                       {"output_index", index},
                                       {"content_index", 0},
                                       {"text", text_},
                                       {"logprobs", logprobs_}});
    emit("response.content_part.done",
         {{"item_id", item_id}, {"output_index", index}, {"content_index", 0}, {"part", part}});
    item["status"] = finish_reason_ == "length" ? "incomplete" : "completed";
    item["content"] = ojson::array({std::move(part)});
  } else {
    emit("response.function_call_arguments.done", {{"item_id", item_id},
                                                   {"output_index", index},
                                                   {"name", item["name"]},
                                                   {"arguments", text_}});
    item["arguments"] = text_;
    item["status"] = "completed";
  }
  emit("response.output_item.done", {{"output_index", index}, {"item", item}});
  open_ = Open::none;
}

void ResponsesFrontEnd::add_reasoning(const std::string& delta) {
  if (open_ != Open::reasoning)
    open(Open::reasoning, {{"id", "rs_" + id_.substr(5) + "_" + std::to_string(output_.size())},
                           {"type", "reasoning"},
                           {"summary", ojson::array()}});
  text_ += delta;
  emit("response.reasoning_summary_text.delta", {{"item_id", output_.back()["id"]},
                                                 {"output_index", int64_t(output_.size()) - 1},
                                                 {"summary_index", 0},
                                                 {"delta", delta}});
}

void ResponsesFrontEnd::add_text(const std::string& delta, const ojson* logprobs) {
  if (open_ != Open::message)
    open(Open::message, {{"id", "msg_" + id_.substr(5) + "_" + std::to_string(output_.size())},
                         {"type", "message"},
                         {"status", "in_progress"},
                         {"role", "assistant"},
                         {"content", ojson::array()}});
  text_ += delta;
  ojson lps = ojson::array();
  if (logprobs)
    for (const ojson& e : *logprobs) lps.push_back(logprob_entry(e));
  for (const ojson& e : lps) logprobs_.push_back(e);
  if (delta.empty() && lps.empty()) return;
  emit("response.output_text.delta", {{"item_id", output_.back()["id"]},
                                      {"output_index", int64_t(output_.size()) - 1},
                                      {"content_index", 0},
                                      {"delta", delta},
                                      {"logprobs", std::move(lps)}});
}

void ResponsesFrontEnd::add_call(const ojson& call, int64_t index) {
  const ojson fn = call.value("function", ojson::object());
  if (open_ != Open::call || index != call_index_) {
    open(Open::call, {{"id", "fc_" + id_.substr(5) + "_" + std::to_string(output_.size())},
                      {"type", "function_call"},
                      {"status", "in_progress"},
                      {"call_id", call.value("id", "")},
                      {"name", fn.value("name", "")},
                      {"arguments", ""}});
    call_index_ = index;
  }
  const std::string delta = fn.value("arguments", "");
  if (delta.empty()) return;
  text_ += delta;
  emit("response.function_call_arguments.delta", {{"item_id", output_.back()["id"]},
                                                  {"output_index", int64_t(output_.size()) - 1},
                                                  {"delta", delta}});
}

void ResponsesFrontEnd::feed(const ojson& m, const ojson* logprobs) {
  if (const ojson* r = member(m, "reasoning_content"); r && r->is_string() && !r->empty())
    add_reasoning(r->get<std::string>());
  const ojson* c = member(m, "content");
  const bool text = c && c->is_string() && !c->get_ref<const std::string&>().empty();
  if (text || (logprobs && !logprobs->empty()))
    add_text(text ? c->get<std::string>() : std::string(), logprobs);
  if (const ojson* calls = member(m, "tool_calls"); calls && calls->is_array())
    for (size_t i = 0; i < calls->size(); ++i) {
      const ojson& call = (*calls)[i];
      add_call(call, call.value("index", int64_t(i)));
    }
}

void ResponsesFrontEnd::chunk(const ojson& c) {
  if (model_.empty()) model_ = c.value("model", "");
  if (const ojson* u = member(c, "usage")) usage_ = *u;
  const ojson* choices = member(c, "choices");
  if (!choices || !choices->is_array() || choices->empty()) return;
  const ojson& ch = (*choices)[0];
  const ojson* lp = nullptr;
  if (const ojson* l = member(ch, "logprobs")) lp = member(*l, "content");
  if (const ojson* f = member(ch, "finish_reason"); f && f->is_string())
    finish_reason_ = f->get<std::string>();
  if (const ojson* d = member(ch, "delta")) feed(*d, lp);
  if (const ojson* d = member(ch, "message")) feed(*d, lp);
}

ojson ResponsesFrontEnd::response(const char* status) const {
  const ojson& r = req_;
  auto echo = [&r](const char* k, ojson dflt) {
    const ojson* v = member(r, k);
    return v ? *v : dflt;
  };
  ojson o = {{"id", id_},
             {"object", "response"},
             {"created_at", created_at_},
             {"status", status},
             {"background", false},
             {"error", error_.is_null() ? ojson(nullptr) : error_},
             {"incomplete_details", nullptr}};
  if (std::string(status) == "incomplete")
    o["incomplete_details"] = {{"reason", "max_output_tokens"}};
  o["instructions"] = echo("instructions", nullptr);
  o["max_output_tokens"] = echo("max_output_tokens", nullptr);
  o["model"] = model_;
  o["output"] = output_;
  o["parallel_tool_calls"] = echo("parallel_tool_calls", true);
  o["previous_response_id"] = echo("previous_response_id", nullptr);
  o["prompt_cache_key"] = echo("prompt_cache_key", nullptr);
  ojson reasoning = {{"effort", nullptr}, {"summary", nullptr}};
  if (const ojson* v = member(r, "reasoning"); v && v->is_object())
    for (auto& [k, x] : v->items()) reasoning[k] = x;
  o["reasoning"] = std::move(reasoning);
  o["safety_identifier"] = echo("safety_identifier", nullptr);
  o["service_tier"] = member(r, "service_tier") ? ojson("default") : ojson(nullptr);
  o["store"] = store_asked_ && store_ && store_->enabled();
  o["temperature"] = echo("temperature", 1.0);
  ojson text = {{"format", {{"type", "text"}}}};
  if (const ojson* v = member(r, "text"); v && v->is_object())
    if (const ojson* f = member(*v, "format")) text["format"] = *f;
  o["text"] = std::move(text);
  o["tool_choice"] = echo("tool_choice", "auto");
  o["tools"] = echo("tools", ojson::array());
  o["top_logprobs"] = echo("top_logprobs", 0);
  o["top_p"] = echo("top_p", 1.0);
  o["truncation"] = "disabled";
  if (usage_.is_object()) {
    const int64_t in = usage_.value("prompt_tokens", int64_t(0));
    const int64_t out = usage_.value("completion_tokens", int64_t(0));
    int64_t cached = 0;
    if (const ojson* d = member(usage_, "prompt_tokens_details"))
      cached = d->value("cached_tokens", int64_t(0));
    o["usage"] = {{"input_tokens", in},
                  {"input_tokens_details", {{"cached_tokens", cached}}},
                  {"output_tokens", out},
                  {"output_tokens_details", {{"reasoning_tokens", 0}}},
                  {"total_tokens", in + out}};
  } else {
    o["usage"] = nullptr;
  }
  o["user"] = echo("user", nullptr);
  o["metadata"] = echo("metadata", ojson::object());
  return o;
}

void ResponsesFrontEnd::keep(const ojson& resp) {
  if (!store_asked_ || !store_ || !store_->enabled()) return;
  ojson conversation = conversation_;
  for (const ojson& it : output_) conversation.push_back(it);
  store_->put(tenant_, id_, resp, std::move(conversation));
}

void ResponsesFrontEnd::finish() {
  if (ended_) return;
  ended_ = true;
  close();
  if (output_.empty()) {  // the model wrote nothing: one empty message, as a whole answer has
    add_text("", nullptr);
    close();
  }
  const char* status = finish_reason_ == "length" ? "incomplete" : "completed";
  ojson resp = response(status);
  emit(finish_reason_ == "length" ? "response.incomplete" : "response.completed",
       {{"response", resp}});
  keep(resp);
  final_ = std::move(resp);
}

void ResponsesFrontEnd::fail(const ojson& error) {
  if (ended_) return;
  ended_ = true;
  const ojson e = error.is_object() ? error : ojson::object();
  const ojson code =
      e.contains("code") && !e["code"].is_null() ? e["code"] : ojson(e.value("type", ""));
  emit("error", {{"code", code},
                 {"message", e.value("message", "")},
                 {"param", e.contains("param") ? e["param"] : ojson(nullptr)}});
  error_ = {{"code", code}, {"message", e.value("message", "")}};
  emit("response.failed", {{"response", response("failed")}});
}

HttpReply ResponsesFrontEnd::whole(int status, const std::string& chat_body) {
  if (status >= 400) {  // OpenAI's shape already: only the chat's field names are renamed
    const ojson b = ojson::parse(chat_body, nullptr, false);
    const ojson* e = b.is_object() ? member(b, "error") : nullptr;
    if (!e || !e->is_object()) return {status, "application/json", chat_body};
    auto text = [e](const char* k) {
      const ojson* v = member(*e, k);
      return v && v->is_string() ? v->get<std::string>() : std::string();
    };
    return error({status, text("message"), text("type"), text("param"), text("code")});
  }
  streaming_ = false;
  const ojson c = ojson::parse(chat_body);
  chunk(c);
  finish();
  return {200, "application/json", json_text(final_)};
}

std::string ResponsesFrontEnd::stream(const std::string& sse, bool done) {
  // response.created waits for the first chunk, which names the model served; keep-alive
  // comments before it pass as they are.
  const auto start = [this](const ojson* c) {
    if (started_) return;
    started_ = true;
    if (c && model_.empty()) model_ = c->value("model", "");
    const ojson r = response("in_progress");
    emit("response.created", {{"response", r}});
    emit("response.in_progress", {{"response", r}});
  };
  size_t pos = 0;
  while (pos < sse.size() && !ended_) {
    size_t end = sse.find("\n\n", pos);
    if (end == std::string::npos) end = sse.size();
    const std::string ev = sse.substr(pos, end - pos);
    pos = end + 2;
    if (ev.empty()) continue;
    if (ev[0] == ':') {  // a keep-alive comment
      out_ += ev + "\n\n";
      continue;
    }
    if (ev.rfind("data: ", 0) != 0) continue;
    const std::string data = ev.substr(6);
    if (data == "[DONE]") {
      start(nullptr);
      finish();
      break;
    }
    const ojson c = ojson::parse(data, nullptr, false);
    if (c.is_discarded()) continue;
    if (const ojson* e = member(c, "error")) {
      start(nullptr);
      fail(*e);
      break;
    }
    start(&c);
    chunk(c);
  }
  if (done && !ended_) {
    start(nullptr);
    finish();
  }
  return std::exchange(out_, std::string());
}

ojson responses_tokenize_body(std::string_view body, ResponseStore* store,
                              const std::string& tenant) {
  Translated t = translate(body, store, tenant);
  ojson b = {{"messages", t.chat["messages"]}};
  if (const ojson* m = member(t.chat, "model")) b["model"] = *m;
  if (const ojson* v = member(t.chat, "tools")) b["tools"] = *v;
  // reasoning_effort's one effect on the prompt (chat_request_parse.cpp): the template's switch.
  if (const ojson* e = member(t.chat, "reasoning_effort"))
    b["chat_template_kwargs"] = {{"enable_thinking", *e != "none" && *e != "minimal"}};
  return b;
}

std::string responses_input_tokens_json(const std::string& tokenize_answer) {
  const ojson t = ojson::parse(tokenize_answer);
  return json_text({{"object", "response.input_tokens"}, {"input_tokens", t.value("count", 0)}});
}

HttpReply responses_stored(const std::string& method, const std::string& id, ResponseStore* store,
                           const std::string& tenant) {
  if (method == "DELETE" ? store && store->erase(tenant, id) : false)
    return {200, "application/json",
            json_text({{"id", id}, {"object", "response.deleted"}, {"deleted", true}})};
  if (method != "DELETE")
    if (auto s = store ? store->get(tenant, id) : nullptr)
      return {200, "application/json", json_text(s->response)};
  const ApiError e = not_found("Response with id '" + echo_cut(id) + "' not found.", "not_found");
  return {e.status, "application/json", e.to_json()};
}

}  // namespace invar::server
