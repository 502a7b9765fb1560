// Anthropic's Messages API as a front end (src/server/messages_front_end.h), without a model:
// request → chat body (and that body passes the chat parser), chat answer → message, chat
// chunks → events (order, indices, stop reasons, usage), errors in Anthropic's shape.
#include "server/messages_front_end.h"

#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/api_request.h"

namespace invar::server {
namespace messages_front_end_test {

using ojson = nlohmann::ordered_json;

ojson chat_of(const ojson& body, bool count = false) {
  return messages_chat_body(body.dump(), count);
}

// The ApiError a body raises (status 0 when it raises none).
ApiError fault_of(const ojson& body, bool count = false) {
  try {
    messages_chat_body(body.dump(), count);
  } catch (const ApiError& e) {
    return e;
  }
  return {0, "", "", "", ""};
}

const ojson kUser = {{"role", "user"}, {"content", "Hi"}};

TEST(MessagesRequest, TextSystemSamplingAndMetadata) {
  const ojson chat = chat_of({{"model", "m"},
                              {"system", "Be brief."},
                              {"messages", {kUser}},
                              {"max_tokens", 7},
                              {"temperature", 0.5},
                              {"top_p", 0.9},
                              {"top_k", 5},
                              {"stop_sequences", {"END"}},
                              {"metadata", {{"user_id", "u-1"}}}});
  const ojson want = {
      {"model", "m"},
      {"messages",
       {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}}},
      {"max_tokens", 7},
      {"temperature", 0.5},
      {"top_p", 0.9},
      {"top_k", 5},
      {"stop", {"END"}},
      {"user", "u-1"}};
  EXPECT_EQ(chat, want);
  // The chat parser takes what the translation writes (every field is a chat field).
  ApiRequest r = api_request_parse(chat.dump(), Endpoint::chat);
  EXPECT_EQ(r.max_tokens, 7);
}

TEST(MessagesRequest, StreamAsksForUsage) {
  const ojson chat =
      chat_of({{"model", "m"}, {"messages", {kUser}}, {"max_tokens", 3}, {"stream", true}});
  EXPECT_EQ(chat["stream"], true);
  EXPECT_EQ(chat["stream_options"], (ojson{{"include_usage", true}}));
  EXPECT_FALSE(
      chat_of({{"model", "m"}, {"messages", {kUser}}, {"max_tokens", 3}, {"stream", false}})
          .contains("stream"));
}

TEST(MessagesRequest, BlocksToolsAndToolLoop) {
  const ojson body = {
      {"model", "m"},
      {"max_tokens", 16},
      {"system", {{{"type", "text"}, {"text", "S"}, {"cache_control", {{"type", "ephemeral"}}}}}},
      {"tools",
       {{{"name", "get_weather"},
         {"description", "Weather"},
         {"input_schema", {{"type", "object"}}},
         {"cache_control", {{"type", "ephemeral"}}}}}},
      {"tool_choice", {{"type", "any"}, {"disable_parallel_tool_use", true}}},
      {"thinking", {{"type", "enabled"}, {"budget_tokens", 2048}}},
      {"messages",
       {{{"role", "user"},
         {"content",
          {{{"type", "text"}, {"text", "Weather?"}},
           {{"type", "image"},
            {"source", {{"type", "base64"}, {"media_type", "image/png"}, {"data", "AAAA"}}}},
           {{"type", "image"}, {"source", {{"type", "url"}, {"url", "https://x/y.png"}}}}}}},
        {{"role", "assistant"},
         {"content",
          {{{"type", "thinking"}, {"thinking", "Need it."}, {"signature", "sig"}},
           {{"type", "redacted_thinking"}, {"data", "opaque"}},
           {{"type", "tool_use"},
            {"id", "toolu_1"},
            {"name", "get_weather"},
            {"input", {{"city", "Oslo"}}}}}}},
        {{"role", "user"},
         {"content",
          {{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "4 degrees"}},
           {{"type", "tool_result"},
            {"tool_use_id", "toolu_2"},
            {"is_error", true},
            {"content", {{{"type", "text"}, {"text", "no such city"}}}}},
           {{"type", "text"}, {"text", "Thanks"}}}}}}}};
  const ojson chat = chat_of(body);
  const ojson want_messages = {
      {{"role", "system"}, {"content", {{{"type", "text"}, {"text", "S"}}}}},
      {{"role", "user"},
       {"content",
        {{{"type", "text"}, {"text", "Weather?"}},
         {{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64,AAAA"}}}},
         {{"type", "image_url"}, {"image_url", {{"url", "https://x/y.png"}}}}}}},
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls",
        {{{"id", "toolu_1"},
          {"type", "function"},
          {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Oslo\"}"}}}}}},
       {"reasoning_content", "Need it."}},
      {{"role", "tool"}, {"tool_call_id", "toolu_1"}, {"content", "4 degrees"}},
      {{"role", "tool"},
       {"tool_call_id", "toolu_2"},
       {"content", {{{"type", "text"}, {"text", "Error: no such city"}}}}},
      {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Thanks"}}}}}};
  EXPECT_EQ(chat["messages"], want_messages);
  EXPECT_EQ(chat["tools"], (ojson{{{"type", "function"},
                                   {"function",
                                    {{"name", "get_weather"},
                                     {"description", "Weather"},
                                     {"parameters", {{"type", "object"}}}}}}}));
  EXPECT_EQ(chat["tool_choice"], "required");
  EXPECT_EQ(chat["parallel_tool_calls"], false);
  EXPECT_EQ(chat["chat_template_kwargs"], (ojson{{"enable_thinking", true}}));
  EXPECT_FALSE(chat.contains("continue_final_message"));
  api_request_parse(chat.dump(), Endpoint::chat);  // throws if the chat side refuses it
}

TEST(MessagesRequest, ToolChoicesAndThinkingOff) {
  ojson body = {{"model", "m"},
                {"messages", {kUser}},
                {"max_tokens", 4},
                {"tools", {{{"name", "f"}, {"input_schema", {{"type", "object"}}}}}}};
  body["tool_choice"] = {{"type", "tool"}, {"name", "f"}};
  EXPECT_EQ(chat_of(body)["tool_choice"],
            (ojson{{"type", "function"}, {"function", {{"name", "f"}}}}));
  EXPECT_FALSE(chat_of(body).contains("parallel_tool_calls"));
  body["tool_choice"] = {{"type", "auto"}, {"disable_parallel_tool_use", false}};
  EXPECT_EQ(chat_of(body)["tool_choice"], "auto");
  EXPECT_EQ(chat_of(body)["parallel_tool_calls"], true);
  body["tool_choice"] = {{"type", "none"}};
  EXPECT_EQ(chat_of(body)["tool_choice"], "none");
  body["thinking"] = {{"type", "disabled"}};
  EXPECT_EQ(chat_of(body)["chat_template_kwargs"], (ojson{{"enable_thinking", false}}));
}

TEST(MessagesRequest, FinalAssistantTurnIsAPrefill) {
  const ojson chat =
      chat_of({{"model", "m"},
               {"max_tokens", 4},
               {"messages", {kUser, {{"role", "assistant"}, {"content", "Sure,"}}}}});
  EXPECT_EQ(chat["continue_final_message"], true);
  api_request_parse(chat.dump(), Endpoint::chat);
}

TEST(MessagesRequest, CountTokensTakesTheRenderingFieldsOnly) {
  const ojson chat = chat_of({{"model", "m"}, {"messages", {kUser}}, {"system", "S"}}, true);
  EXPECT_EQ(
      chat,
      (ojson{{"model", "m"},
             {"messages",
              {{{"role", "system"}, {"content", "S"}}, {{"role", "user"}, {"content", "Hi"}}}}}));
  EXPECT_EQ(fault_of({{"model", "m"}, {"messages", {kUser}}, {"max_tokens", 3}}, true).param,
            "max_tokens");
  const ojson image = {
      {"role", "user"},
      {"content", {{{"type", "image"}, {"source", {{"type", "url"}, {"url", "https://x"}}}}}}};
  EXPECT_EQ(fault_of({{"model", "m"}, {"messages", {image}}}, true).param,
            "messages[0].content[0]");
}

TEST(MessagesRequest, FaultsNameTheAnthropicField) {
  const ojson ok = {{"model", "m"}, {"messages", {kUser}}, {"max_tokens", 4}};
  auto with = [&](const char* k, ojson v) {
    ojson b = ok;
    b[k] = std::move(v);
    return fault_of(b);
  };
  EXPECT_EQ(fault_of(ok).status, 0);
  ojson no_max = ok;
  no_max.erase("max_tokens");
  ApiError e = fault_of(no_max);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "max_tokens");
  EXPECT_EQ(e.message, "'max_tokens' is required");
  e = with("frequency_penalty", 1);  // a chat field, not Anthropic's
  EXPECT_EQ(e.param, "frequency_penalty");
  EXPECT_NE(e.message.find("unknown field 'frequency_penalty'"), std::string::npos) << e.message;
  EXPECT_EQ(with("temperature", 1.5).param, "temperature");
  EXPECT_EQ(with("max_tokens", 0).param, "max_tokens");
  EXPECT_EQ(with("tool_choice", {{"type", "sometimes"}}).param, "tool_choice.type");
  EXPECT_EQ(with("thinking", {{"type", "enabled"}}).param, "thinking.budget_tokens");
  EXPECT_EQ(with("metadata", {{"tier", "x"}}).param, "metadata.tier");
  EXPECT_EQ(with("tools", {{{"type", "web_search_20250305"}, {"name", "w"}}}).param,
            "tools[0].type");
  EXPECT_EQ(with("tools", {{{"name", "f"}}}).param, "tools[0].input_schema");
  EXPECT_EQ(with("messages", {{{"role", "system"}, {"content", "x"}}}).param, "messages[0].role");
  EXPECT_EQ(with("messages", {{{"role", "user"},
                               {"content", {{{"type", "document"}, {"source", ojson::object()}}}}}})
                .param,
            "messages[0].content[0].type");
  EXPECT_EQ(
      with("messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"txt", "x"}}}}}}).param,
      "messages[0].content[0].txt");
  EXPECT_EQ(
      with("messages",
           {{{"role", "assistant"},
             {"content", {{{"type", "tool_use"}, {"id", "a"}, {"name", "f"}, {"input", "{}"}}}}}})
          .param,
      "messages[0].content[0].input");
  EXPECT_EQ(fault_of({{"messages", {kUser}}, {"max_tokens", 4}}).param, "model");
  EXPECT_THROW(messages_chat_body("[1]"), ApiError);
}

const ojson kChatAnswer = {{"id", "chatcmpl-0123456789abcdef"},
                           {"object", "chat.completion"},
                           {"created", 1},
                           {"model", "tiny"},
                           {"choices",
                            {{{"index", 0},
                              {"message",
                               {{"role", "assistant"},
                                {"content", "Hello"},
                                {"reasoning_content", "Think."},
                                {"tool_calls",
                                 {{{"id", "call_1"},
                                   {"type", "function"},
                                   {"function", {{"name", "f"}, {"arguments", "{\"a\":1}"}}}}}}}},
                              {"logprobs", nullptr},
                              {"finish_reason", "tool_calls"}}}},
                           {"usage",
                            {{"prompt_tokens", 40},
                             {"completion_tokens", 9},
                             {"total_tokens", 49},
                             {"prompt_tokens_details", {{"cached_tokens", 32}}}}}};

TEST(MessagesAnswer, ContentBlocksStopReasonAndUsage) {
  const ojson want = {
      {"id", "msg_0123456789abcdef"},
      {"type", "message"},
      {"role", "assistant"},
      {"model", "tiny"},
      {"content",
       {{{"type", "thinking"}, {"thinking", "Think."}, {"signature", ""}},
        {{"type", "text"}, {"text", "Hello"}},
        {{"type", "tool_use"}, {"id", "call_1"}, {"name", "f"}, {"input", {{"a", 1}}}}}},
      {"stop_reason", "tool_use"},
      {"stop_sequence", nullptr},
      {"usage",
       {{"input_tokens", 8},
        {"output_tokens", 9},
        {"cache_creation_input_tokens", 0},
        {"cache_read_input_tokens", 32}}}};
  MessagesFrontEnd fe;
  HttpReply r = fe.whole(200, kChatAnswer.dump());
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(ojson::parse(r.body), want);
  ojson plain = kChatAnswer;
  plain["choices"][0]["message"] = {{"role", "assistant"}, {"content", ""}};
  for (auto [finish, stop] : {std::pair{"stop", "end_turn"}, std::pair{"length", "max_tokens"}}) {
    plain["choices"][0]["finish_reason"] = finish;
    const ojson m = messages_answer_json(plain);
    EXPECT_EQ(m["stop_reason"], stop);
    EXPECT_EQ(m["content"], ojson::array()) << "no empty text block";
  }
}

TEST(MessagesErrors, ShapeAndTypeFromStatus) {
  MessagesFrontEnd fe;
  HttpReply r = fe.error(bad_request("max_tokens", "'max_tokens' is required"));
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(
      ojson::parse(r.body),
      (ojson{{"type", "error"},
             {"error",
              {{"type", "invalid_request_error"}, {"message", "'max_tokens' is required"}}}}));
  EXPECT_EQ(ojson::parse(fe.error(unauthorized()).body)["error"]["type"], "authentication_error");
  EXPECT_EQ(ojson::parse(fe.error(not_found("no", "model_not_found")).body)["error"]["type"],
            "not_found_error");
  EXPECT_EQ(ojson::parse(fe.error(overloaded("busy")).body)["error"]["type"], "rate_limit_error");
  EXPECT_EQ(ojson::parse(fe.error(unavailable("down")).body)["error"]["type"], "overloaded_error");
  EXPECT_EQ(ojson::parse(fe.error(internal_error("bug")).body)["error"]["type"], "api_error");
  // A chat error answer (OpenAI's shape) keeps its status and message.
  ApiError unmet{422, "tool_choice asked for a tool call", "unprocessable_entity_error",
                 "tool_choice", "tool_choice_unmet"};
  r = fe.whole(422, unmet.to_json());
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(ojson::parse(r.body), (ojson{{"type", "error"},
                                         {"error",
                                          {{"type", "invalid_request_error"},
                                           {"message", "tool_choice asked for a tool call"}}}}));
}

// The events of an SSE text, as {event name, data}.
std::vector<std::pair<std::string, ojson>> events_of(const std::string& sse) {
  std::vector<std::pair<std::string, ojson>> out;
  size_t pos = 0;
  while (pos < sse.size()) {
    size_t end = sse.find("\n\n", pos);
    const std::string ev = sse.substr(pos, end - pos);
    pos = end + 2;
    if (ev.rfind("event: ", 0) != 0) {
      out.push_back({ev, nullptr});
      continue;
    }
    const size_t nl = ev.find('\n');
    EXPECT_EQ(ev.compare(nl + 1, 6, "data: "), 0) << ev;
    const std::string name = ev.substr(7, nl - 7);
    ojson data = ojson::parse(ev.substr(nl + 7));
    EXPECT_EQ(data["type"], name) << "the data's type repeats the event name";
    out.push_back({name, std::move(data)});
  }
  return out;
}

std::string chunk(const ojson& delta, const char* finish = nullptr) {
  ojson c = {{"id", "chatcmpl-00000000000000aa"},
             {"object", "chat.completion.chunk"},
             {"model", "tiny"},
             {"choices",
              {{{"index", 0},
                {"delta", delta},
                {"finish_reason", finish ? ojson(finish) : ojson(nullptr)}}}}};
  return "data: " + c.dump() + "\n\n";
}

TEST(MessagesStream, EventsInOrderWithIndicesAndUsage) {
  MessagesFrontEnd fe;
  std::string out = fe.stream(chunk({{"role", "assistant"}, {"content", ""}}), false);
  out += fe.stream(chunk({{"reasoning_content", "Th"}}) + chunk({{"reasoning_content", "ink"}}),
                   false);
  out += fe.stream(": keep-alive\n\n", false);
  out += fe.stream(chunk({{"content", "Hi"}}), false);
  out += fe.stream(
      chunk({{"tool_calls",
              {{{"index", 0},
                {"id", "call_a"},
                {"type", "function"},
                {"function", {{"name", "f"}, {"arguments", ""}}}}}}}) +
          chunk({{"tool_calls", {{{"index", 0}, {"function", {{"arguments", "{\"a\":"}}}}}}}) +
          chunk({{"tool_calls", {{{"index", 0}, {"function", {{"arguments", "1}"}}}}}}}) +
          chunk({{"tool_calls",
                  {{{"index", 1},
                    {"id", "call_b"},
                    {"type", "function"},
                    {"function", {{"name", "g"}, {"arguments", "{}"}}}}}}}),
      false);
  out += fe.stream(chunk(ojson::object(), "tool_calls"), false);
  const ojson usage = {{"id", "chatcmpl-00000000000000aa"},
                       {"choices", ojson::array()},
                       {"usage",
                        {{"prompt_tokens", 20},
                         {"completion_tokens", 7},
                         {"prompt_tokens_details", {{"cached_tokens", 16}}}}}};
  out += fe.stream("data: " + usage.dump() + "\n\ndata: [DONE]\n\n", true);
  const auto ev = events_of(out);
  std::vector<std::string> names;
  for (auto& e : ev) names.push_back(e.first);
  const std::vector<std::string> want = {"message_start",       "ping",
                                         "content_block_start", "content_block_delta",
                                         "content_block_delta", ": keep-alive",
                                         "content_block_stop",  "content_block_start",
                                         "content_block_delta", "content_block_stop",
                                         "content_block_start", "content_block_delta",
                                         "content_block_delta", "content_block_stop",
                                         "content_block_start", "content_block_delta",
                                         "content_block_stop",  "message_delta",
                                         "message_stop"};
  EXPECT_EQ(names, want);
  ASSERT_EQ(ev.size(), want.size());
  EXPECT_EQ(ev[0].second["message"]["id"], "msg_00000000000000aa");
  EXPECT_EQ(ev[0].second["message"]["model"], "tiny");
  EXPECT_EQ(ev[2].second["content_block"],
            (ojson{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}));
  EXPECT_EQ(ev[4].second["delta"], (ojson{{"type", "thinking_delta"}, {"thinking", "ink"}}));
  EXPECT_EQ(ev[7].second["index"], 1);
  EXPECT_EQ(ev[8].second["delta"], (ojson{{"type", "text_delta"}, {"text", "Hi"}}));
  EXPECT_EQ(
      ev[10].second["content_block"],
      (ojson{{"type", "tool_use"}, {"id", "call_a"}, {"name", "f"}, {"input", ojson::object()}}));
  EXPECT_EQ(ev[11].second["delta"],
            (ojson{{"type", "input_json_delta"}, {"partial_json", "{\"a\":"}}));
  EXPECT_EQ(ev[12].second["index"], 2);
  EXPECT_EQ(ev[14].second["index"], 3);
  EXPECT_EQ(ev[14].second["content_block"]["id"], "call_b");
  EXPECT_EQ(ev[16].second["index"], 3);
  EXPECT_EQ(ev[17].second["delta"]["stop_reason"], "tool_use");
  EXPECT_EQ(ev[17].second["usage"], (ojson{{"input_tokens", 4},
                                           {"output_tokens", 7},
                                           {"cache_creation_input_tokens", 0},
                                           {"cache_read_input_tokens", 16}}));
  EXPECT_EQ(fe.stream("", true), "") << "finished once";
}

TEST(MessagesStream, LengthStopsAsMaxTokens) {
  MessagesFrontEnd fe;
  const auto ev =
      events_of(fe.stream(chunk({{"content", "a"}}) + chunk(ojson::object(), "length"), true));
  ASSERT_GE(ev.size(), 2u);
  EXPECT_EQ(ev[ev.size() - 2].second["delta"]["stop_reason"], "max_tokens");
}

TEST(MessagesStream, ErrorChunkBecomesAnErrorEvent) {
  MessagesFrontEnd fe;
  std::string out = fe.stream(chunk({{"content", "a"}}), false);
  ApiError e = overloaded("queue full");
  out += fe.stream("data: " + e.to_json() + "\n\ndata: [DONE]\n\n", true);
  const auto ev = events_of(out);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.back().first, "error");
  EXPECT_EQ(ev.back().second["error"],
            (ojson{{"type", "rate_limit_error"}, {"message", "queue full"}}));
}

}  // namespace messages_front_end_test
}  // namespace invar::server
