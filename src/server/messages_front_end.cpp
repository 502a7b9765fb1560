#include "server/messages_front_end.h"

#include "server/api_response.h"  // json, json_text
#include "server/json_fields.h"

namespace invar::server {
namespace {
// Named apart: the library is built in unity batches, where every file's anonymous namespace
// is the same one.
namespace anthropic_answer {

using ojson = nlohmann::ordered_json;

// The Anthropic error type of an HTTP status.
const char* error_type_of(int status) {
  switch (status) {
    case 400:
    case 405:
    case 422:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return status >= 400 && status < 500 ? "invalid_request_error" : "api_error";
  }
}

// The status an OpenAI-shaped error chunk of a stream stands for (its type; api_error.cpp).
int status_of_type(const std::string& type) {
  if (type == "invalid_request_error" || type == "unprocessable_entity_error") return 400;
  if (type == "server_overloaded") return 429;
  if (type == "server_unavailable") return 503;
  return 500;
}

std::string event(const char* type, const ojson& data) {
  return sse_event(type, data);
}

std::string message_id(const ojson& chat) {
  const ojson* id = json_member(chat, "id");
  std::string s = id && id->is_string() ? id->get<std::string>() : "";
  const std::string prefix = "chatcmpl-";
  if (s.rfind(prefix, 0) == 0) s.erase(0, prefix.size());
  return "msg_" + s;
}

// Anthropic's usage from the chat's: input_tokens, cache_read_input_tokens and
// cache_creation_input_tokens add up to the prompt. Every uncached token is cached as it is
// read, at no extra cost: it is counted once, as input, and cache creation stays 0.
ojson usage_translate(const ojson& u) {
  const int64_t prompt = u.value("prompt_tokens", int64_t(0));
  int64_t cached = 0;
  if (const ojson* d = json_member(u, "prompt_tokens_details"))
    cached = d->value("cached_tokens", int64_t(0));
  return {{"input_tokens", prompt - cached},
          {"output_tokens", u.value("completion_tokens", int64_t(0))},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", cached}};
}

std::string stop_reason_of(const std::string& finish) {
  if (finish == "length") return "max_tokens";
  if (finish == "tool_calls") return "tool_use";
  return "end_turn";
}

ojson answer_translate(const ojson& chat) {
  const ojson& choice = chat.at("choices").at(0);
  const ojson& msg = choice.at("message");
  ojson content = ojson::array();
  if (const ojson* r = json_member(msg, "reasoning_content");
      r && !r->get_ref<const std::string&>().empty())
    // invar signs nothing; the field is there because Anthropic's clients send it back.
    content.push_back({{"type", "thinking"}, {"thinking", *r}, {"signature", ""}});
  if (const ojson* t = json_member(msg, "content"); t && !t->get_ref<const std::string&>().empty())
    content.push_back({{"type", "text"}, {"text", *t}});
  if (const ojson* calls = json_member(msg, "tool_calls"))
    for (const ojson& c : *calls) {
      const std::string& args = c.at("function").at("arguments").get_ref<const std::string&>();
      // The output parser hands out arguments that are a JSON object (chat/output_parser.h);
      // anything else would be its bug, which must not take the server down here.
      ojson input = ojson::parse(args, nullptr, false);
      if (!input.is_object()) input = ojson::object();
      content.push_back({{"type", "tool_use"},
                         {"id", c.at("id")},
                         {"name", c.at("function").at("name")},
                         {"input", std::move(input)}});
    }
  const ojson* finish = json_member(choice, "finish_reason");
  return {{"id", message_id(chat)},
          {"type", "message"},
          {"role", "assistant"},
          {"model", chat.value("model", "")},
          {"content", std::move(content)},
          {"stop_reason", stop_reason_of(finish ? finish->get<std::string>() : "")},
          {"stop_sequence", nullptr},
          {"usage", usage_translate(chat.at("usage"))}};
}

}  // namespace anthropic_answer
}  // namespace

json messages_error_json(int status, const std::string& message) {
  return json{{"type", "error"},
              {"error",
               {{"type", anthropic_answer::error_type_of(status)},
                {"message", echo_cut(message, kErrorMessageBytes)}}}};
}

json messages_answer_json(const json& chat) {
  return anthropic_answer::answer_translate(chat);
}

json MessagesFrontEnd::chat_body(std::string_view body) {
  return messages_chat_body(body);
}

HttpReply MessagesFrontEnd::whole(int status, const std::string& chat_body) {
  const json chat = json::parse(chat_body, nullptr, false);
  if (status < 400 && !chat.is_object())  // invar's own answer: a bug
    return {500, "application/json",
            json_text(messages_error_json(500, "the chat answer is not a JSON object"))};
  if (status >= 400) {
    std::string message = chat_body;
    if (const json* e = chat.is_object() ? json_member(chat, "error") : nullptr;
        e && e->is_object() && e->contains("message") && (*e)["message"].is_string())
      message = (*e)["message"].get<std::string>();
    return {status, "application/json", json_text(messages_error_json(status, message))};
  }
  return {200, "application/json", json_text(messages_answer_json(chat))};
}

HttpReply MessagesFrontEnd::error(const ApiError& e) const {
  return {e.status, "application/json", json_text(messages_error_json(e.status, e.message))};
}

void MessagesFrontEnd::block_open(Block kind, json start, std::string* out) {
  block_close(out);
  open_ = kind;
  *out += anthropic_answer::event(
      "content_block_start",
      {{"type", "content_block_start"}, {"index", ++index_}, {"content_block", std::move(start)}});
}

void MessagesFrontEnd::block_close(std::string* out) {
  if (open_ == Block::none) return;
  *out += anthropic_answer::event("content_block_stop",
                                  {{"type", "content_block_stop"}, {"index", index_}});
  open_ = Block::none;
}

void MessagesFrontEnd::chunk_take(const std::string& data, std::string* out) {
  const json c = json::parse(data);
  if (const json* e = json_member(c, "error")) {
    const int status = anthropic_answer::status_of_type(e->value("type", ""));
    *out += anthropic_answer::event("error", messages_error_json(status, e->value("message", "")));
    ended_ = true;
    return;
  }
  if (!started_) {
    started_ = true;
    json message = {{"id", anthropic_answer::message_id(c)},
                    {"type", "message"},
                    {"role", "assistant"},
                    {"model", c.value("model", "")},
                    {"content", json::array()},
                    {"stop_reason", nullptr},
                    {"stop_sequence", nullptr},
                    {"usage", anthropic_answer::usage_translate(json::object())}};
    *out += anthropic_answer::event("message_start",
                                    {{"type", "message_start"}, {"message", std::move(message)}});
    *out += anthropic_answer::event("ping", {{"type", "ping"}});
  }
  if (const json* u = json_member(c, "usage")) usage_ = *u;
  const json* choices = json_member(c, "choices");
  if (!choices || choices->empty()) return;
  const json& choice = (*choices)[0];
  const auto delta_event = [&](json delta) {
    *out += anthropic_answer::event(
        "content_block_delta",
        {{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(delta)}});
  };
  if (const json* d = json_member(choice, "delta")) {
    if (const json* r = json_member(*d, "reasoning_content");
        r && !r->get_ref<const std::string&>().empty()) {
      if (open_ != Block::thinking)
        block_open(Block::thinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}},
                   out);
      delta_event({{"type", "thinking_delta"}, {"thinking", *r}});
    }
    if (const json* t = json_member(*d, "content");
        t && !t->get_ref<const std::string&>().empty()) {
      if (open_ != Block::text) block_open(Block::text, {{"type", "text"}, {"text", ""}}, out);
      delta_event({{"type", "text_delta"}, {"text", *t}});
    }
    if (const json* calls = json_member(*d, "tool_calls"))
      for (const json& call : *calls) {
        const json& fn = call.at("function");
        // A call's first delta carries its id and name; the later ones, argument text.
        if (const json* id = json_member(call, "id"))
          block_open(Block::tool_use,
                     {{"type", "tool_use"},
                      {"id", *id},
                      {"name", fn.at("name")},
                      {"input", json::object()}},
                     out);
        const std::string args = fn.value("arguments", "");
        if (!args.empty() && open_ == Block::tool_use)
          delta_event({{"type", "input_json_delta"}, {"partial_json", args}});
      }
  }
  if (const json* f = json_member(choice, "finish_reason")) finish_reason_ = f->get<std::string>();
}

void MessagesFrontEnd::finish(std::string* out) {
  if (ended_) return;
  ended_ = true;
  if (!started_) chunk_take("{}", out);
  block_close(out);
  *out += anthropic_answer::event(
      "message_delta",
      {{"type", "message_delta"},
       {"delta",
        {{"stop_reason", anthropic_answer::stop_reason_of(finish_reason_)},
         {"stop_sequence", nullptr}}},
       {"usage", anthropic_answer::usage_translate(usage_.is_null() ? json::object() : usage_)}});
  *out += anthropic_answer::event("message_stop", {{"type", "message_stop"}});
}

std::string MessagesFrontEnd::stream(const std::string& sse, bool done) {
  std::string out;
  size_t pos = 0;
  while (pos < sse.size()) {
    size_t end = sse.find("\n\n", pos);
    if (end == std::string::npos) end = sse.size();
    const std::string ev = sse.substr(pos, end - pos);
    pos = end + 2;
    if (ev.rfind("data: ", 0) != 0) {
      if (!ev.empty()) out += ev + "\n\n";  // a keep-alive comment
      continue;
    }
    const std::string data = ev.substr(6);
    if (data == "[DONE]")
      finish(&out);
    else if (!ended_)
      chunk_take(data, &out);
  }
  if (done) finish(&out);
  return out;
}

}  // namespace invar::server
