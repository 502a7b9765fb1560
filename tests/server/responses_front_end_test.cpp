// OpenAI's Responses API as a front end, without a model: the request's items and fields as
// the chat body they mean, the chat answer as a response object, the chat stream as typed
// events (order, sequence numbers, indices), the store behind previous_response_id and GET,
// and its byte bound.
#include "server/responses_front_end.h"

#include <gtest/gtest.h>

#include <vector>

#include "server/response_store.h"

namespace responses_front_end_test {

using namespace invar::server;
using ojson = nlohmann::ordered_json;

namespace {

ojson chat_of(const ojson& body, ResponseStore* store = nullptr, const std::string& tenant = "") {
  ResponsesFrontEnd fe(store, tenant);
  return fe.chat_body(body.dump());
}

ApiError refusal(const ojson& body) {
  try {
    chat_of(body);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body.dump();
  return {};
}

struct Event {
  std::string type;
  ojson data;
};

std::vector<Event> events(const std::string& sse) {
  std::vector<Event> out;
  size_t pos = 0;
  while (pos < sse.size()) {
    size_t end = sse.find("\n\n", pos);
    const std::string ev = sse.substr(pos, end - pos);
    pos = end + 2;
    if (ev.rfind("event: ", 0) != 0) continue;
    const size_t nl = ev.find('\n');
    EXPECT_EQ(ev.compare(nl + 1, 6, "data: "), 0) << ev;
    out.push_back({ev.substr(7, nl - 7), ojson::parse(ev.substr(nl + 7))});
  }
  return out;
}

std::string chunk(const ojson& delta, const ojson& finish = nullptr) {
  ojson c = {{"id", "chatcmpl-1"},
             {"object", "chat.completion.chunk"},
             {"created", 5},
             {"model", "m"},
             {"choices", {{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}}}};
  return "data: " + c.dump() + "\n\n";
}

std::string usage_chunk(int in, int out, int cached) {
  ojson c = {{"id", "chatcmpl-1"},
             {"choices", ojson::array()},
             {"usage",
              {{"prompt_tokens", in},
               {"completion_tokens", out},
               {"total_tokens", in + out},
               {"prompt_tokens_details", {{"cached_tokens", cached}}}}}};
  return "data: " + c.dump() + "\n\n";
}

}  // namespace

TEST(ResponsesRequest, ItemsBecomeTheChatConversation) {
  const ojson body = {
      {"model", "m"},
      {"instructions", "Be brief."},
      {"input",
       {{{"role", "user"},
         {"content",
          {{{"type", "input_text"}, {"text", "look"}},
           {{"type", "input_image"}, {"image_url", "data:image/png;base64,AAAA"}}}}},
        {{"type", "reasoning"},
         {"id", "rs_1"},
         {"summary", {{{"type", "summary_text"}, {"text", "hmm"}}}}},
        {{"type", "function_call"},
         {"call_id", "call_a"},
         {"name", "f"},
         {"arguments", "{\"x\":1}"}},
        {{"type", "function_call"}, {"call_id", "call_b"}, {"name", "g"}, {"arguments", "{}"}},
        {{"type", "function_call_output"}, {"call_id", "call_a"}, {"output", "42"}},
        {{"type", "message"},
         {"role", "assistant"},
         {"content", {{{"type", "output_text"}, {"text", "done"}}}}},
        {{"type", "message"}, {"role", "developer"}, {"content", "dev"}}}}};
  const ojson chat = chat_of(body);
  const ojson want = ojson::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "look"},
      {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
    {"role": "assistant", "content": null, "reasoning_content": "hmm", "tool_calls": [
      {"id": "call_a", "type": "function", "function": {"name": "f", "arguments": "{\"x\":1}"}},
      {"id": "call_b", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_a", "content": "42"},
    {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    {"role": "developer", "content": "dev"}])");
  EXPECT_EQ(chat["messages"], want) << chat["messages"].dump(1);
  EXPECT_EQ(chat["model"], "m");
  EXPECT_FALSE(chat.contains("stream"));
}

TEST(ResponsesRequest, FieldsTakeTheirChatNames) {
  const ojson body = ojson::parse(R"({
    "model": "m", "input": "hi", "stream": true, "max_output_tokens": 9, "temperature": 0,
    "top_p": 0.5, "top_logprobs": 2, "parallel_tool_calls": false, "user": "u",
    "prompt_cache_key": "k", "metadata": {"a": "b"}, "reasoning": {"effort": "low"},
    "tools": [{"type": "function", "name": "f", "description": "d",
               "parameters": {"type": "object"}, "strict": true}],
    "tool_choice": {"type": "function", "name": "f"},
    "text": {"format": {"type": "json_schema", "name": "s", "schema": {"type": "integer"},
                        "strict": true}},
    "include": ["message.output_text.logprobs"], "store": false})");
  const ojson chat = chat_of(body);
  const ojson want = ojson::parse(R"({
    "model": "m", "messages": [{"role": "user", "content": "hi"}],
    "tools": [{"type": "function", "function": {"name": "f", "description": "d",
               "parameters": {"type": "object"}, "strict": true}}],
    "tool_choice": {"type": "function", "function": {"name": "f"}},
    "parallel_tool_calls": false, "temperature": 0, "top_p": 0.5, "metadata": {"a": "b"},
    "user": "u", "prompt_cache_key": "k", "max_tokens": 9,
    "response_format": {"type": "json_schema", "json_schema": {"name": "s",
                        "schema": {"type": "integer"}, "strict": true}},
    "reasoning_effort": "low", "top_logprobs": 2, "logprobs": true, "stream": true,
    "stream_options": {"include_usage": true}})");
  EXPECT_EQ(chat, want) << chat.dump(1);
  EXPECT_EQ(chat_of({{"input", "x"},
                     {"text", {{"format", {{"type", "json_object"}}}}}})["response_format"],
            ojson({{"type", "json_object"}}));
  EXPECT_FALSE(chat_of({{"input", "x"}, {"text", {{"format", {{"type", "text"}}}}}})
                   .contains("response_format"));
}

TEST(ResponsesRequest, RefusalsNameTheField) {
  EXPECT_EQ(refusal({{"input", "x"}, {"frequency_penalty", 1}}).param, "frequency_penalty");
  const ApiError bg = refusal({{"input", "x"}, {"background", true}});
  EXPECT_EQ(bg.param, "background");
  EXPECT_NE(bg.message.find("background"), std::string::npos);
  const ApiError tool = refusal({{"input", "x"}, {"tools", {{{"type", "web_search"}}}}});
  EXPECT_EQ(tool.param, "tools[0].type");
  EXPECT_NE(tool.message.find("web_search"), std::string::npos);
  EXPECT_EQ(refusal({{"model", "m"}}).param, "input");
  EXPECT_EQ(refusal({{"input", {{{"type", "computer_call"}, {"id", "x"}}}}}).param,
            "input[0].type");
  const ApiError ref =
      refusal({{"input", {"x", {{"type", "item_reference"}, {"id", "msg_ab_1"}}}}});
  EXPECT_EQ(ref.status, 404);
  EXPECT_EQ(refusal({{"input", "x"}, {"include", {"reasoning.encrypted_content"}}}).param,
            "include");
  EXPECT_EQ(refusal({{"input", "x"}, {"previous_response_id", "resp_nope"}}).status, 404);
  // A wrong type passes to the chat's parser, whose 400 names it (not an exception here).
  EXPECT_NO_THROW(chat_of({{"input", "x"}, {"stream", "yes"}}));
  // background false is what every client may send.
  EXPECT_NO_THROW(chat_of({{"input", "x"}, {"background", false}}));
}

// input_tokens counts the prompt the chat would render: reasoning.effort switches thinking as the
// chat's reasoning_effort does (vLLM's meaning: only "none" turns it off).
TEST(ResponsesRequest, InputTokensBodyThinksAsTheChatWould) {
  for (const char* effort : {"none", "minimal", "low", "max"}) {
    const ojson body = {{"input", "x"}, {"reasoning", {{"effort", effort}}}};
    const ojson t = responses_tokenize_body(body.dump(), nullptr, "");
    EXPECT_EQ(t["chat_template_kwargs"]["enable_thinking"], std::string(effort) != "none")
        << effort;
  }
}

TEST(ResponsesRequest, ChatErrorsNameTheResponsesField) {
  ResponsesFrontEnd fe(nullptr, "");
  const ojson e = ojson::parse(fe.error(bad_request("max_tokens", "too many")).body)["error"];
  EXPECT_EQ(e["param"], "max_output_tokens");
  EXPECT_NE(e["message"].get<std::string>().find("too many"), std::string::npos);
  EXPECT_EQ(ojson::parse(fe.error(bad_request("messages[2].content", "x")).body)["error"]["param"],
            "input");
  EXPECT_EQ(ojson::parse(fe.error(bad_request("temperature", "x")).body)["error"]["param"],
            "temperature");
  EXPECT_EQ(fe.error(not_found("gone", "not_found")).status, 404);
}

TEST(ResponsesAnswer, ChatMessageBecomesOutputItems) {
  ResponseStore store(1 << 20);
  ResponsesFrontEnd fe(&store, "t");
  fe.chat_body(R"({"model": "m", "input": "hi", "max_output_tokens": 4, "temperature": 0})");
  const ojson chat = ojson::parse(R"({"id": "chatcmpl-1", "object": "chat.completion",
    "created": 5, "model": "m", "choices": [{"index": 0, "finish_reason": "tool_calls",
    "logprobs": null, "message": {"role": "assistant", "content": "ok",
    "reasoning_content": "think", "tool_calls": [{"id": "call_1", "type": "function",
    "function": {"name": "f", "arguments": "{}"}}]}}],
    "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10,
              "prompt_tokens_details": {"cached_tokens": 4}}})");
  const HttpReply reply = fe.whole(200, chat.dump());
  ASSERT_EQ(reply.status, 200);
  const ojson r = ojson::parse(reply.body);
  EXPECT_EQ(r["id"], fe.id());
  EXPECT_EQ(r["id"].get<std::string>().rfind("resp_", 0), 0u);
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["status"], "completed");
  EXPECT_EQ(r["max_output_tokens"], 4);
  EXPECT_EQ(r["temperature"], 0);
  ASSERT_EQ(r["output"].size(), 3u) << r.dump(1);
  EXPECT_EQ(r["output"][0]["type"], "reasoning");
  EXPECT_EQ(r["output"][0]["summary"],
            ojson::parse(R"([{"type": "summary_text", "text": "think"}])"));
  EXPECT_EQ(r["output"][1]["type"], "message");
  EXPECT_EQ(r["output"][1]["content"][0]["type"], "output_text");
  EXPECT_EQ(r["output"][1]["content"][0]["text"], "ok");
  EXPECT_EQ(r["output"][1]["content"][0]["annotations"], ojson::array());
  EXPECT_EQ(r["output"][2]["type"], "function_call");
  EXPECT_EQ(r["output"][2]["call_id"], "call_1");
  EXPECT_EQ(r["output"][2]["name"], "f");
  EXPECT_EQ(r["output"][2]["arguments"], "{}");
  EXPECT_EQ(r["usage"], ojson::parse(R"({"input_tokens": 7,
    "input_tokens_details": {"cached_tokens": 4}, "output_tokens": 3,
    "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 10})"));
  // Stored: GET returns it; the conversation continues from its items.
  const HttpReply got = responses_stored("GET", fe.id(), &store, "t");
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(ojson::parse(got.body), r);
  EXPECT_EQ(responses_stored("GET", fe.id(), &store, "other").status, 404);
  const ojson next = chat_of(
      {{"input", {{{"type", "function_call_output"}, {"call_id", "call_1"}, {"output", "5"}}}},
       {"previous_response_id", fe.id()}},
      &store, "t");
  const ojson want = ojson::parse(R"([{"role": "user", "content": "hi"},
    {"role": "assistant", "content": [{"type": "text", "text": "ok"}],
     "reasoning_content": "think", "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "5"}])");
  EXPECT_EQ(next["messages"], want) << next["messages"].dump(1);
  // The Vercel AI SDK sends a stored response's items back by reference.
  const ojson output = r["output"];
  const ojson by_ref =
      chat_of({{"input",
                {{{"role", "user"}, {"content", "hi"}},
                 {{"type", "item_reference"}, {"id", output[0]["id"]}},
                 {{"type", "item_reference"}, {"id", output[1]["id"]}},
                 {{"type", "item_reference"}, {"id", output[2]["id"]}},
                 {{"type", "function_call_output"}, {"call_id", "call_1"}, {"output", "5"}}}}},
              &store, "t");
  EXPECT_EQ(by_ref["messages"], want) << by_ref["messages"].dump(1);
  try {
    chat_of({{"input", {{{"type", "item_reference"}, {"id", output[1]["id"]}}}}}, &store, "u");
    ADD_FAILURE() << "another tenant's item was found";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 404);
    EXPECT_EQ(e.param, "input[0].id");
  }
  EXPECT_EQ(responses_stored("DELETE", fe.id(), &store, "other").status, 404);
  EXPECT_EQ(responses_stored("DELETE", fe.id(), &store, "t").status, 200);
  EXPECT_EQ(responses_stored("GET", fe.id(), &store, "t").status, 404);
}

TEST(ResponsesAnswer, LengthIsIncompleteAndErrorsPassThrough) {
  ResponsesFrontEnd fe(nullptr, "");
  fe.chat_body(R"({"input": "hi", "store": false})");
  const ojson chat = ojson::parse(R"({"id": "c", "created": 5, "model": "m", "choices": [
    {"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": "ab"}}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3,
              "prompt_tokens_details": {"cached_tokens": 0}}})");
  const ojson r = ojson::parse(fe.whole(200, chat.dump()).body);
  EXPECT_EQ(r["status"], "incomplete");
  EXPECT_EQ(r["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(r["output"][0]["status"], "incomplete");
  EXPECT_EQ(r["store"], false);
  ResponsesFrontEnd fe2(nullptr, "");
  const HttpReply err = fe2.whole(
      400, R"({"error":{"message":"bad","type":"invalid_request_error","param":"max_tokens",)"
           R"("code":null}})");
  EXPECT_EQ(err.status, 400);
  const ojson e = ojson::parse(err.body)["error"];
  EXPECT_EQ(e["param"], "max_output_tokens");
  EXPECT_EQ(e["type"], "invalid_request_error");
  EXPECT_EQ(e["code"], nullptr);
}

TEST(ResponsesStream, ChunksBecomeTypedEventsInOrder) {
  ResponseStore store(1 << 20);
  ResponsesFrontEnd fe(&store, "");
  fe.chat_body(R"({"input": "hi", "stream": true, "top_logprobs": 1})");
  ojson lp = ojson::parse(R"({"content": [{"token": "He", "logprob": -0.5, "bytes": [72, 101],
    "top_logprobs": [{"token": "He", "logprob": -0.5, "bytes": [72, 101]}]}]})");
  ojson c1 = ojson::parse(chunk({{"role", "assistant"}, {"reasoning_content", "r"}}).substr(6));
  std::string sse = "data: " + c1.dump() + "\n\n";
  ojson c2 = ojson::parse(chunk({{"content", "He"}}).substr(6));
  c2["choices"][0]["logprobs"] = lp;
  sse += "data: " + c2.dump() + "\n\n";
  std::string out = fe.stream(": keep-alive\n\n", false);
  EXPECT_EQ(out, ": keep-alive\n\n");
  out += fe.stream(sse, false);
  out += fe.stream(": keep-alive\n\n" + chunk({{"content", "llo"}}), false);
  out += fe.stream(
      chunk({{"tool_calls",
              {{{"index", 0},
                {"id", "call_1"},
                {"type", "function"},
                {"function", {{"name", "f"}, {"arguments", "{\"a\""}}}}}}}) +
          chunk({{"tool_calls", {{{"index", 0}, {"function", {{"arguments", ":1}"}}}}}}}) +
          chunk({{"tool_calls",
                  {{{"index", 1},
                    {"id", "call_2"},
                    {"function", {{"name", "g"}, {"arguments", "{}"}}}}}}},
                "tool_calls"),
      false);
  out += fe.stream(usage_chunk(3, 4, 1) + "data: [DONE]\n\n", true);
  EXPECT_NE(out.find(": keep-alive\n\n"), std::string::npos);
  EXPECT_EQ(out.find("[DONE]"), std::string::npos);
  const std::vector<Event> ev = events(out);
  std::vector<std::string> types;
  for (const Event& e : ev) types.push_back(e.type);
  const std::vector<std::string> want = {"response.created",
                                         "response.in_progress",
                                         "response.output_item.added",  // reasoning, 0
                                         "response.reasoning_summary_part.added",
                                         "response.reasoning_summary_text.delta",
                                         "response.reasoning_summary_text.done",
                                         "response.reasoning_summary_part.done",
                                         "response.output_item.done",
                                         "response.output_item.added",  // message, 1
                                         "response.content_part.added",
                                         "response.output_text.delta",
                                         "response.output_text.delta",
                                         "response.output_text.done",
                                         "response.content_part.done",
                                         "response.output_item.done",
                                         "response.output_item.added",  // call_1, 2
                                         "response.function_call_arguments.delta",
                                         "response.function_call_arguments.delta",
                                         "response.function_call_arguments.done",
                                         "response.output_item.done",
                                         "response.output_item.added",  // call_2, 3
                                         "response.function_call_arguments.delta",
                                         "response.function_call_arguments.done",
                                         "response.output_item.done",
                                         "response.completed"};
  ASSERT_EQ(types, want);
  for (size_t i = 0; i < ev.size(); ++i) {
    EXPECT_EQ(ev[i].data["type"], ev[i].type);
    EXPECT_EQ(ev[i].data["sequence_number"], int64_t(i));
  }
  EXPECT_EQ(ev[0].data["response"]["status"], "in_progress");
  EXPECT_EQ(ev[0].data["response"]["id"], fe.id());
  EXPECT_EQ(ev[0].data["response"]["model"], "m");  // the request named none: the chunk's
  EXPECT_EQ(ev[2].data["output_index"], 0);
  EXPECT_EQ(ev[8].data["output_index"], 1);
  EXPECT_EQ(ev[10].data["content_index"], 0);
  EXPECT_EQ(ev[10].data["item_id"], ev[8].data["item"]["id"]);
  EXPECT_EQ(ev[10].data["logprobs"][0]["token"], "He");
  EXPECT_EQ(ev[12].data["text"], "Hello");
  EXPECT_EQ(ev[15].data["item"]["call_id"], "call_1");
  EXPECT_EQ(ev[15].data["output_index"], 2);
  EXPECT_EQ(ev[18].data["arguments"], "{\"a\":1}");
  EXPECT_EQ(ev[20].data["output_index"], 3);
  const ojson& done = ev.back().data["response"];
  EXPECT_EQ(done["status"], "completed");
  ASSERT_EQ(done["output"].size(), 4u);
  EXPECT_EQ(done["output"][1]["content"][0]["text"], "Hello");
  EXPECT_EQ(done["output"][1]["content"][0]["logprobs"].size(), 1u);
  EXPECT_EQ(done["output"][2]["arguments"], "{\"a\":1}");
  EXPECT_EQ(done["output"][3]["name"], "g");
  EXPECT_EQ(done["usage"]["input_tokens"], 3);
  EXPECT_EQ(done["usage"]["input_tokens_details"]["cached_tokens"], 1);
  EXPECT_EQ(done["usage"]["total_tokens"], 7);
  // The streamed response is stored as it ended.
  EXPECT_EQ(ojson::parse(responses_stored("GET", fe.id(), &store, "").body), done);
}

TEST(ResponsesStream, AnErrorFailsTheResponse) {
  ResponsesFrontEnd fe(nullptr, "");
  fe.chat_body(R"({"input": "hi", "stream": true})");
  std::string out = fe.stream(chunk({{"content", "a"}}), false);
  out += fe.stream(
      R"(data: {"error":{"message":"gone","type":"server_error","param":null,"code":"x"}})"
      "\n\ndata: [DONE]\n\n",
      true);
  const std::vector<Event> ev = events(out);
  ASSERT_GE(ev.size(), 2u);
  EXPECT_EQ(ev[ev.size() - 2].type, "error");
  EXPECT_EQ(ev[ev.size() - 2].data["message"], "gone");
  EXPECT_EQ(ev.back().type, "response.failed");
  EXPECT_EQ(ev.back().data["response"]["status"], "failed");
  EXPECT_EQ(ev.back().data["response"]["error"]["code"], "x");
}

TEST(ResponseStore, KeepsTheRecentWithinItsBytes) {
  const ojson big = {{"text", std::string(1000, 'x')}};
  ResponseStore store(3500);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(store.put("t", "r" + std::to_string(i), big, big));
  EXPECT_EQ(store.size(), 1u);  // each entry is ~2 KB of the 3.5 KB
  ResponseStore s2(7000);       // three entries, not four
  for (int i = 0; i < 3; ++i) s2.put("t", "r" + std::to_string(i), big, big);
  EXPECT_EQ(s2.size(), 3u);
  EXPECT_NE(s2.get("t", "r0"), nullptr);  // r0 is now the most recent: r1 goes next
  s2.put("t", "r3", big, big);
  EXPECT_LE(s2.bytes(), 7000);
  EXPECT_NE(s2.get("t", "r0"), nullptr);
  EXPECT_EQ(s2.get("t", "r1"), nullptr);
  EXPECT_NE(s2.get("t", "r3"), nullptr);
  EXPECT_EQ(s2.get("u", "r3"), nullptr);  // another tenant's
  EXPECT_FALSE(s2.put("t", "huge", ojson{{"t", std::string(10000, 'y')}}, big));
  ResponseStore off(0);
  EXPECT_FALSE(off.put("t", "r", big, big));
  EXPECT_EQ(off.size(), 0u);
}

}  // namespace responses_front_end_test
