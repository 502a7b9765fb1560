#include "server/responses_front_end.h"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <random>
#include <set>

#include "server/api_response.h"
#include "server/json_fields.h"
#include "server/responses_request.h"

namespace invar::server {
namespace {

using ojson = nlohmann::ordered_json;

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
}  // namespace

ResponsesFrontEnd::ResponsesFrontEnd(ResponseStore* store, std::string tenant)
    : store_(store),
      tenant_(std::move(tenant)),
      id_("resp_" + random_hex(24)),
      created_at_(int64_t(std::time(nullptr))) {}

nlohmann::ordered_json ResponsesFrontEnd::chat_body(std::string_view body) {
  ResponsesRequest t = responses_request_translate(body, store_, tenant_);
  req_ = std::move(t.req);
  conversation_ = std::move(t.conversation);
  store_asked_ = t.store;
  const ojson* stream = json_member(t.chat, "stream");
  streaming_ = stream && *stream == true;  // another type is the chat parser's 400
  if (const ojson* m = json_member(req_, "model"); m && m->is_string())
    model_ = m->get<std::string>();
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
  if (const ojson* r = json_member(m, "reasoning_content"); r && r->is_string() && !r->empty())
    add_reasoning(r->get<std::string>());
  const ojson* c = json_member(m, "content");
  const bool text = c && c->is_string() && !c->get_ref<const std::string&>().empty();
  if (text || (logprobs && !logprobs->empty()))
    add_text(text ? c->get<std::string>() : std::string(), logprobs);
  if (const ojson* calls = json_member(m, "tool_calls"); calls && calls->is_array())
    for (size_t i = 0; i < calls->size(); ++i) {
      const ojson& call = (*calls)[i];
      add_call(call, call.value("index", int64_t(i)));
    }
}

void ResponsesFrontEnd::chunk(const ojson& c) {
  if (model_.empty()) model_ = c.value("model", "");
  if (const ojson* u = json_member(c, "usage")) usage_ = *u;
  const ojson* choices = json_member(c, "choices");
  if (!choices || !choices->is_array() || choices->empty()) return;
  const ojson& ch = (*choices)[0];
  const ojson* lp = nullptr;
  if (const ojson* l = json_member(ch, "logprobs")) lp = json_member(*l, "content");
  if (const ojson* f = json_member(ch, "finish_reason"); f && f->is_string())
    finish_reason_ = f->get<std::string>();
  if (const ojson* d = json_member(ch, "delta")) feed(*d, lp);
  if (const ojson* d = json_member(ch, "message")) feed(*d, lp);
}

ojson ResponsesFrontEnd::response(const char* status) const {
  const ojson& r = req_;
  auto echo = [&r](const char* k, ojson dflt) {
    const ojson* v = json_member(r, k);
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
  if (const ojson* v = json_member(r, "reasoning"); v && v->is_object())
    for (auto& [k, x] : v->items()) reasoning[k] = x;
  o["reasoning"] = std::move(reasoning);
  o["safety_identifier"] = echo("safety_identifier", nullptr);
  o["service_tier"] = json_member(r, "service_tier") ? ojson("default") : ojson(nullptr);
  o["store"] = store_asked_ && store_ && store_->enabled();
  o["temperature"] = echo("temperature", 1.0);
  ojson text = {{"format", {{"type", "text"}}}};
  if (const ojson* v = json_member(r, "text"); v && v->is_object())
    if (const ojson* f = json_member(*v, "format")) text["format"] = *f;
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
    if (const ojson* d = json_member(usage_, "prompt_tokens_details"))
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
    const ojson* e = b.is_object() ? json_member(b, "error") : nullptr;
    if (!e || !e->is_object()) return {status, "application/json", chat_body};
    auto text = [e](const char* k) {
      const ojson* v = json_member(*e, k);
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
    if (const ojson* e = json_member(c, "error")) {
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
  ResponsesRequest t = responses_request_translate(body, store, tenant);
  ojson b = {{"messages", t.chat["messages"]}};
  if (const ojson* m = json_member(t.chat, "model")) b["model"] = *m;
  if (const ojson* v = json_member(t.chat, "tools")) b["tools"] = *v;
  // reasoning_effort's one effect on the prompt (chat_request_parse.cpp): the template's switch.
  if (const ojson* e = json_member(t.chat, "reasoning_effort"))
    b["chat_template_kwargs"] = {{"enable_thinking", *e != "none"}};
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
