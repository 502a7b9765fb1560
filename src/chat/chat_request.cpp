#include "chat/chat_request.h"

#include <cstdio>

#include "core/error.h"

namespace invar::chat {
namespace {

void parse_tool_call_arguments(nlohmann::ordered_json& messages) {
  for (size_t m = 0; m < messages.size(); ++m) {
    auto& msg = messages[m];
    if (!msg.is_object() || !msg.contains("tool_calls") || !msg["tool_calls"].is_array()) continue;
    auto& calls = msg["tool_calls"];
    for (size_t c = 0; c < calls.size(); ++c) {
      if (!calls[c].is_object() || !calls[c].contains("function")) continue;
      auto& fn = calls[c]["function"];
      if (!fn.is_object() || !fn.contains("arguments") || !fn["arguments"].is_string()) continue;
      const std::string text = fn["arguments"].get<std::string>();
      if (text.empty()) {
        fn["arguments"] = nlohmann::ordered_json::object();
        continue;
      }
      try {
        fn["arguments"] = nlohmann::ordered_json::parse(text);
      } catch (const nlohmann::json::exception&) {
        throw Error("messages[" + std::to_string(m) + "].tool_calls[" + std::to_string(c) +
                    "].function.arguments is not valid JSON");
      }
    }
  }
}

}  // namespace

nlohmann::ordered_json chat_template_context(const nlohmann::ordered_json& request,
                                             const std::string& bos_token,
                                             const std::string& eos_token,
                                             ContentFormat content_format) {
  if (!request.is_object()) throw Error("the request must be a JSON object");
  if (!request.contains("messages") || !request["messages"].is_array()) {
    throw Error("'messages' must be an array");
  }
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  ctx["messages"] = request["messages"];
  parse_tool_call_arguments(ctx["messages"]);
  content_format_apply(content_format, ctx["messages"]);
  // transformers passes tools=None and documents=None when there are none: a template's
  // `tools is defined` is true, `tools is none` too, and a loop over them fails as in jinja2.
  ctx["tools"] = nullptr;
  if (request.contains("tools") && !request["tools"].is_null()) {
    if (!request["tools"].is_array()) throw Error("'tools' must be an array");
    ctx["tools"] = request["tools"];
  }
  ctx["documents"] = nullptr;
  bool add_generation_prompt = true;
  if (request.contains("add_generation_prompt")) {
    if (!request["add_generation_prompt"].is_boolean()) {
      throw Error("'add_generation_prompt' must be a boolean");
    }
    add_generation_prompt = request["add_generation_prompt"].get<bool>();
  }
  ctx["add_generation_prompt"] = add_generation_prompt;
  ctx["bos_token"] = bos_token;
  ctx["eos_token"] = eos_token;
  if (request.contains("chat_template_kwargs") && !request["chat_template_kwargs"].is_null()) {
    const auto& kw = request["chat_template_kwargs"];
    if (!kw.is_object()) throw Error("'chat_template_kwargs' must be an object");
    for (const auto& [k, v] : kw.items()) {
      // What the request itself decides is not a template keyword's to override.
      if (k == "messages" || k == "tools" || k == "add_generation_prompt") continue;
      ctx[k] = v;
    }
  }
  return ctx;
}

std::tm parse_iso8601(const std::string& text) {
  std::tm t{};
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0, n = 0;
  const int got = std::sscanf(text.c_str(), "%4d-%2d-%2d%n", &y, &mo, &d, &n);
  if (got != 3 || mo < 1 || mo > 12 || d < 1 || d > 31) {
    throw Error("--now: expected an ISO-8601 date such as 2026-01-31T12:00:00, got '" + text + "'");
  }
  const char* rest = text.c_str() + n;
  if (*rest == 'T' || *rest == ' ') {
    int n2 = 0;
    if (std::sscanf(rest + 1, "%2d:%2d%n", &h, &mi, &n2) != 2 || h > 23 || mi > 59) {
      throw Error("--now: bad time in '" + text + "'");
    }
    rest += 1 + n2;
    if (*rest == ':') {
      int n3 = 0;
      if (std::sscanf(rest + 1, "%2d%n", &s, &n3) != 1 || s > 60) {
        throw Error("--now: bad seconds in '" + text + "'");
      }
      rest += 1 + n3;
    }
  }
  t.tm_year = y - 1900;
  t.tm_mon = mo - 1;
  t.tm_mday = d;
  t.tm_hour = h;
  t.tm_min = mi;
  t.tm_sec = s;
  // Weekday and day of the year, which %A, %a and %j print.
  std::tm copy = t;
  copy.tm_isdst = 0;
  const time_t as_utc = timegm(&copy);
  std::tm norm{};
  gmtime_r(&as_utc, &norm);
  t.tm_wday = norm.tm_wday;
  t.tm_yday = norm.tm_yday;
  t.tm_isdst = -1;
  return t;
}

}  // namespace invar::chat
