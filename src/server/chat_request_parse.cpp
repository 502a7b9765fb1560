#include "server/chat_request_parse.h"

#include <set>

#include "server/api_error.h"
#include "server/json_fields.h"

namespace invar::server {
namespace {

using ojson = nlohmann::ordered_json;

constexpr size_t kMaxTools = 128;  // OpenAI's limit
constexpr int kMaxDepth = 64;      // as the request body itself

// Whether `text` is a JSON object nested no deeper than the body may be.
bool json_object_text(const std::string& text) {
  try {
    ojson v = ojson::parse(text, [](int depth, ojson::parse_event_t, ojson&) {
      if (depth > kMaxDepth) throw std::runtime_error("too deep");
      return true;
    });
    return v.is_object();
  } catch (const std::exception&) {
    return false;
  }
}

const std::string& string_member(const ojson& o, const char* name, const std::string& where,
                                 bool non_empty) {
  const ojson* v = json_member(o, name);
  const std::string field = where + "." + name;
  if (!v) throw bad_request(field, "'" + field + "' is required");
  if (!v->is_string()) json_wrong_type(field, "a string", *v);
  if (non_empty && v->get_ref<const std::string&>().empty())
    throw bad_request(field, "'" + field + "' must not be empty");
  return v->get_ref<const std::string&>();
}

// OpenAI's image part {"type": "image_url", "image_url": {"url": URL, "detail"?}}, with the
// spellings other servers take: image_url as a bare string (vLLM), and the Responses API's
// {"type": "input_image", "image_url": URL}.
bool image_part(const ojson& part) {
  const ojson* type = json_member(part, "type");
  return type && (*type == "image_url" || *type == "input_image");
}

const std::string& image_url_of(const ojson& part, const std::string& pname) {
  const ojson* v = json_member(part, "image_url");
  const std::string field = pname + ".image_url";
  if (!v) throw bad_request(field, "'" + field + "' is required for an image part");
  if (v->is_string()) return v->get_ref<const std::string&>();
  if (!v->is_object()) json_wrong_type(field, "an object {\"url\": ...} or a string", *v);
  if (const ojson* d = json_member(*v, "detail"); d && !d->is_string())
    json_wrong_type(field + ".detail", "a string", *d);
  return string_member(*v, "url", field, true);
}

void check_content(const ojson& m, const std::string& where, const std::string& role) {
  auto it = m.find("content");
  const std::string field = where + ".content";
  if (it == m.end() || it->is_null()) {
    if (role == "assistant") return;  // a turn of tool calls, or an empty prefill
    throw bad_request(field, "'" + field + "' is required for role '" + role + "'");
  }
  if (it->is_string()) return;
  if (!it->is_array()) json_wrong_type(field, "a string or an array of content parts", *it);
  for (size_t i = 0; i < it->size(); ++i) {
    const ojson& part = (*it)[i];
    const std::string pname = field + "[" + std::to_string(i) + "]";
    if (!part.is_object()) json_wrong_type(pname, "an object", part);
    const ojson* type = json_member(part, "type");
    if (!type || !type->is_string())
      throw bad_request(pname + ".type", "'" + pname + ".type' must be a string");
    if (image_part(part)) {
      image_url_of(part, pname);
      continue;
    }
    if (*type != "text")
      throw bad_request(pname + ".type", "content parts of type '" + type->get<std::string>() +
                                             "' are not supported (text, image_url)");
    string_member(part, "text", pname, false);
  }
}

// Images into ChatInput::images, each part replaced by {"type": "image"} in the messages the
// template renders.
void images_take(ChatInput& in) {
  auto ms = in.request.find("messages");
  if (ms == in.request.end()) return;
  for (size_t i = 0; i < ms->size(); ++i) {
    auto c = (*ms)[i].find("content");
    if (c == (*ms)[i].end() || !c->is_array()) continue;
    for (size_t j = 0; j < c->size(); ++j) {
      ojson& part = (*c)[j];
      if (!image_part(part)) continue;
      const std::string pname =
          "messages[" + std::to_string(i) + "].content[" + std::to_string(j) + "]";
      in.images.push_back({image_url_of(part, pname), pname + ".image_url"});
      part = ojson{{"type", "image"}};
    }
  }
}

void check_tool_calls(const ojson& calls, const std::string& where) {
  const std::string field = where + ".tool_calls";
  if (!calls.is_array()) json_wrong_type(field, "an array", calls);
  for (size_t i = 0; i < calls.size(); ++i) {
    const ojson& c = calls[i];
    const std::string cname = field + "[" + std::to_string(i) + "]";
    if (!c.is_object()) json_wrong_type(cname, "an object", c);
    if (const ojson* id = json_member(c, "id"); id && !id->is_string())
      json_wrong_type(cname + ".id", "a string", *id);
    if (const ojson* t = json_member(c, "type"); t && *t != "function")
      throw bad_request(cname + ".type", "'" + cname + ".type' must be \"function\"");
    const ojson* fn = json_member(c, "function");
    if (!fn) throw bad_request(cname + ".function", "'" + cname + ".function' is required");
    if (!fn->is_object()) json_wrong_type(cname + ".function", "an object", *fn);
    string_member(*fn, "name", cname + ".function", true);
    const ojson* args = json_member(*fn, "arguments");
    const std::string aname = cname + ".function.arguments";
    if (!args || args->is_object()) continue;
    if (!args->is_string()) json_wrong_type(aname, "a JSON string or an object", *args);
    const std::string& text = args->get_ref<const std::string&>();
    if (text.empty()) continue;
    if (!json_object_text(text))
      throw bad_request(aname, "'" + aname + "' must hold a JSON object");
  }
}

void check_messages(const ojson& body) {
  const ojson* ms = json_member(body, "messages");
  if (!ms) throw bad_request("messages", "'messages' is required");
  if (!ms->is_array()) json_wrong_type("messages", "an array", *ms);
  if (ms->empty()) throw bad_request("messages", "'messages' must not be empty");
  for (size_t i = 0; i < ms->size(); ++i) {
    const ojson& m = (*ms)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) json_wrong_type(where, "an object", m);
    const ojson* role = json_member(m, "role");
    if (!role || !role->is_string())
      throw bad_request(where + ".role", "'" + where + ".role' must be a string");
    const std::string& r = role->get_ref<const std::string&>();
    if (r != "system" && r != "developer" && r != "user" && r != "assistant" && r != "tool")
      throw bad_request(where + ".role", "role '" + r +
                                             "' is not supported (system, developer, user, "
                                             "assistant, tool)");
    const ojson* calls = json_member(m, "tool_calls");
    if (calls && r != "assistant")
      throw bad_request(where + ".tool_calls", "only assistant messages carry tool_calls");
    if (calls) check_tool_calls(*calls, where);
    check_content(m, where, r);
    if (const ojson* v = json_member(m, "name"); v && !v->is_string())
      json_wrong_type(where + ".name", "a string", *v);
    if (const ojson* v = json_member(m, "tool_call_id"); v && !v->is_string())
      json_wrong_type(where + ".tool_call_id", "a string", *v);
    // vLLM's new name for reasoning_content is reasoning; both are read, as vLLM reads both
    // while the old one is deprecated.
    for (const char* name : {"reasoning_content", "reasoning"})
      if (const ojson* v = json_member(m, name)) {
        if (r != "assistant")
          throw bad_request(where + "." + name,
                            std::string("only assistant messages carry ") + name);
        if (!v->is_string()) json_wrong_type(where + "." + name, "a string", *v);
      }
    const ojson* rc = json_member(m, "reasoning_content");
    if (const ojson* rs = json_member(m, "reasoning"); rs && rc && *rs != *rc)
      throw bad_request(where + ".reasoning",
                        "'" + where + ".reasoning' and '" + where +
                            ".reasoning_content' are one field under two names: they differ");
  }
}

// The templates read an assistant turn's thought as reasoning_content: a message that sent it as
// reasoning gets it under that name too (check_messages made sure both agree when both came).
void reasoning_alias_apply(ojson& messages) {
  for (ojson& m : messages)
    if (const ojson* rs = json_member(m, "reasoning"); rs && !json_member(m, "reasoning_content"))
      m["reasoning_content"] = *rs;
}

// The function names offered.
std::set<std::string> check_tools(const ojson& body) {
  std::set<std::string> names;
  const ojson* tools = json_member(body, "tools");
  if (!tools) return names;
  if (!tools->is_array()) json_wrong_type("tools", "an array", *tools);
  if (tools->size() > kMaxTools)
    throw bad_request("tools", "'tools' may offer at most " + std::to_string(kMaxTools));
  for (size_t i = 0; i < tools->size(); ++i) {
    const ojson& t = (*tools)[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) json_wrong_type(where, "an object", t);
    const ojson* type = json_member(t, "type");
    if (!type || *type != "function")
      throw bad_request(where + ".type", "'" + where + ".type' must be \"function\"");
    const ojson* fn = json_member(t, "function");
    if (!fn) throw bad_request(where + ".function", "'" + where + ".function' is required");
    if (!fn->is_object()) json_wrong_type(where + ".function", "an object", *fn);
    const std::string& name = string_member(*fn, "name", where + ".function", true);
    if (!names.insert(name).second)
      throw bad_request(where + ".function.name", "the tool '" + name + "' is offered twice");
    if (const ojson* d = json_member(*fn, "description"); d && !d->is_string())
      json_wrong_type(where + ".function.description", "a string", *d);
    if (const ojson* p = json_member(*fn, "parameters"); p && !p->is_object())
      json_wrong_type(where + ".function.parameters", "an object (a JSON schema)", *p);
    if (const ojson* s = json_member(*fn, "strict"); s && !s->is_boolean())
      json_wrong_type(where + ".function.strict", "a boolean", *s);
  }
  return names;
}

void parse_tool_choice(const ojson& body, const std::set<std::string>& names, ChatInput& in) {
  const ojson* tc = json_member(body, "tool_choice");
  if (!tc) {
    in.tool_choice = names.empty() ? ToolChoice::none : ToolChoice::auto_;
    return;
  }
  if (tc->is_string()) {
    const std::string& s = tc->get_ref<const std::string&>();
    if (s == "none")
      in.tool_choice = ToolChoice::none;
    else if (s == "auto")
      in.tool_choice = ToolChoice::auto_;
    else if (s == "required")
      in.tool_choice = ToolChoice::required;
    else
      throw bad_request(
          "tool_choice",
          "'tool_choice' must be none, auto, required or a named function, not '" + s + "'");
  } else if (tc->is_object()) {
    const ojson* type = json_member(*tc, "type");
    if (!type || *type != "function")
      throw bad_request("tool_choice.type", "'tool_choice.type' must be \"function\"");
    const ojson* fn = json_member(*tc, "function");
    if (!fn || !fn->is_object())
      throw bad_request("tool_choice.function", "'tool_choice.function' must be an object");
    in.tool_choice = ToolChoice::named;
    in.tool_choice_name = string_member(*fn, "name", "tool_choice.function", true);
    if (!names.count(in.tool_choice_name))
      throw bad_request("tool_choice.function.name", "'tool_choice' names '" + in.tool_choice_name +
                                                         "', which is not among the offered tools");
  } else {
    json_wrong_type("tool_choice", "a string or an object", *tc);
  }
  if (in.tool_choice != ToolChoice::none && in.tool_choice != ToolChoice::auto_ && names.empty())
    throw bad_request("tool_choice", "'tool_choice' requires a tool, but 'tools' offers none");
}

bool bool_member(const ojson& body, const char* name, bool dflt) {
  const ojson* v = json_member(body, name);
  if (!v) return dflt;
  if (!v->is_boolean()) json_wrong_type(name, "a boolean", *v);
  return v->get<bool>();
}

// reasoning_effort with vLLM's meaning: none turns the template's thinking switch off, every
// other effort on (the completion job checks that the template has the switch); the effort is
// also a template variable, as vLLM passes it, for templates that grade their thinking by it.
void reasoning_effort_apply(const ojson& body, ChatInput& in) {
  const ojson* v = json_member(body, "reasoning_effort");
  if (!v) return;
  if (!v->is_string()) json_wrong_type("reasoning_effort", "a string", *v);
  const std::string& e = v->get_ref<const std::string&>();
  if (e != "none" && e != "minimal" && e != "low" && e != "medium" && e != "high" && e != "xhigh" &&
      e != "max")
    throw bad_request("reasoning_effort",
                      "'reasoning_effort' must be none, minimal, low, medium, high, xhigh or max, "
                      "not '" +
                          e + "'");
  const bool thinking = e != "none";
  ojson& kw = in.request["chat_template_kwargs"];
  if (kw.is_null()) kw = ojson::object();
  if (const ojson* set = json_member(kw, "enable_thinking"); set && *set != ojson(thinking))
    throw bad_request("reasoning_effort", "'reasoning_effort' \"" + e + "\" turns thinking " +
                                              (thinking ? "on" : "off") +
                                              ", but chat_template_kwargs.enable_thinking is " +
                                              set->dump());
  if (const ojson* set = json_member(kw, "reasoning_effort"); set && *set != ojson(e))
    throw bad_request("reasoning_effort", "'reasoning_effort' is \"" + e +
                                              "\", but chat_template_kwargs.reasoning_effort is " +
                                              set->dump());
  kw["enable_thinking"] = thinking;
  kw["reasoning_effort"] = e;
  in.reasoning_effort = e;
}

}  // namespace

ChatInput chat_request_parse(const ojson& body) {
  ChatInput in;
  check_messages(body);
  const std::set<std::string> names = check_tools(body);
  parse_tool_choice(body, names, in);
  in.parallel_tool_calls = bool_member(body, "parallel_tool_calls", true);
  const bool add_generation_prompt = bool_member(body, "add_generation_prompt", true);
  in.continue_final_message = bool_member(body, "continue_final_message", false);
  if (in.continue_final_message && add_generation_prompt &&
      json_member(body, "add_generation_prompt"))
    throw bad_request("continue_final_message",
                      "'continue_final_message' and 'add_generation_prompt' cannot both be true");
  if (const ojson* kw = json_member(body, "chat_template_kwargs"); kw && !kw->is_object())
    json_wrong_type("chat_template_kwargs", "an object", *kw);
  // The request's own field decides whether the prompt ends with the assistant's header
  // (continue_final_message depends on it); a second, conflicting place to say it is refused.
  if (const ojson* kw = json_member(body, "chat_template_kwargs");
      kw && json_member(*kw, "add_generation_prompt"))
    throw bad_request("chat_template_kwargs.add_generation_prompt",
                      "'chat_template_kwargs.add_generation_prompt' is not accepted: send "
                      "'add_generation_prompt' (or 'continue_final_message') at the top level");
  if (json_member(body, "chat_template"))
    throw bad_request("chat_template",
                      "'chat_template' per request is not supported: the server renders its "
                      "model's template (or the one given by --chat-template)");
  in.request = ojson::object();
  for (const char* k : {"messages", "tools", "chat_template_kwargs"})
    if (const ojson* v = json_member(body, k)) in.request[k] = *v;
  reasoning_alias_apply(in.request["messages"]);
  in.request["add_generation_prompt"] = add_generation_prompt && !in.continue_final_message;
  images_take(in);
  reasoning_effort_apply(body, in);
  return in;
}

}  // namespace invar::server
