// The model's output split into what an OpenAI chat response carries: `content`,
// `reasoning_content` (text inside <think>…</think>) and `tool_calls` (Qwen's <tool_call> blocks,
// either JSON as Hermes / Qwen2.5 / Qwen3 write them, or the XML <function=…><parameter=…> form of
// Qwen3-Coder / Qwen3.5).
//
// The parser is incremental: feed() takes the text in any pieces and returns what became
// certain; finish() flushes what was held back. The deltas of a whole output concatenate to the
// same result whatever the split points, so a whole response is the fold of its stream.
//
// Reasoning follows vLLM's qwen3 reasoning parser: when the prompt leaves a <think> block open
// (Qwen3.5, Qwen3 thinking models) the output starts inside reasoning; otherwise a <think> at the
// very start opens it. </think> ends it, and so does a <tool_call> followed by <function (Qwen3.5
// may call a tool without closing its thought). Output that never closes reasoning (truncated)
// is all reasoning. Unlike vLLM, whitespace right after </think> and whitespace between tool calls
// is dropped, as the templates drop it when they render the turn back.
//
// Tool calls: an id `call_…`, the name, and `arguments` as a JSON string (compact). A JSON call is
// emitted whole when its </tool_call> arrives; an XML call sends its header at <function=NAME>,
// then one argument piece per </parameter> (values typed by the tool's JSON schema, as vLLM's
// qwen3coder parser does), then the closing brace. A block that is not a valid call stays in
// `content` as text.
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace invar::chat {

enum class ToolCallSyntax {
  none,       // <tool_call> is plain text
  hermes,     // <tool_call>{"name": …, "arguments": {…}}</tool_call>
  qwen3_xml,  // <tool_call><function=NAME><parameter=P>value</parameter></function></tool_call>
};

struct OutputParserOptions {
  bool reasoning = true;             // false: <think> is plain text (--reasoning-format none)
  bool starts_in_reasoning = false;  // the prompt ends inside an open <think> block
  ToolCallSyntax tool_calls = ToolCallSyntax::none;
  nlohmann::ordered_json tools;  // the request's `tools` (types XML parameter values); may be null
  // The id of the call with this index; default: "call_" + 24 random hex digits.
  std::function<std::string(size_t index)> make_id;
};

struct ToolCallDelta {
  size_t index = 0;
  std::string id, name;   // set on the first delta of a call only
  std::string arguments;  // the next piece of the arguments JSON text
};

struct OutputDelta {
  std::string content, reasoning;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return content.empty() && reasoning.empty() && tool_calls.empty(); }
  void append(OutputDelta&& more);  // pieces of one call are merged
};

// A whole call, as the fold of its deltas.
struct ToolCall {
  std::string id, name, arguments;
};

class OutputParser {
 public:
  explicit OutputParser(OutputParserOptions opt);
  OutputDelta feed(std::string_view text);
  OutputDelta finish();  // the output ended: nothing is held back after this

  // Everything emitted so far.
  const std::string& content() const { return all_content_; }
  const std::string& reasoning() const { return all_reasoning_; }
  const std::vector<ToolCall>& tool_calls() const { return calls_; }

 private:
  enum class State { start, reasoning, content, call_open, call_json, call_xml };
  bool step(OutputDelta& d, bool at_end);  // one transition; false when it needs more text
  bool step_start(bool at_end);
  bool step_reasoning(OutputDelta& d, bool at_end);
  bool step_content(OutputDelta& d, bool at_end);
  bool step_call_open(OutputDelta& d, bool at_end);
  bool step_call_json(OutputDelta& d, bool at_end);
  bool step_call_xml(OutputDelta& d, bool at_end);
  void emit_content(OutputDelta& d, std::string_view text);
  void emit_reasoning(OutputDelta& d, std::string_view text);
  void call_begin(OutputDelta& d, std::string name);
  void call_arguments(OutputDelta& d, const std::string& piece);
  void call_abandon(OutputDelta& d);  // the block was not a call: its text becomes content
  size_t calls_in_delta(const OutputDelta& d) const;  // calls begun in d (not yet recorded)
  void record(const OutputDelta& d);

  OutputParserOptions opt_;
  State state_ = State::start;
  std::string buf_;         // text not yet consumed
  std::string call_text_;   // the raw text of the block being parsed (for call_abandon)
  std::string content_ws_;  // trailing whitespace of content, held until more content follows
  bool skip_ws_ = false;    // drop whitespace before the next content (after </think>, a call)
  std::string calls_pending_name_;  // the function of the XML call being parsed
  bool params_any_ = false, function_closed_ = false;
  std::string all_content_, all_reasoning_;
  std::vector<ToolCall> calls_;
};

// XML parameter value → JSON, by the type the tool's schema gives `param` of `function` (vLLM's
// qwen3coder rules; untyped or unknown parameters stay strings).
nlohmann::ordered_json tool_parameter_value(const nlohmann::ordered_json& tools,
                                            const std::string& function, const std::string& param,
                                            const std::string& raw);
// A Hermes JSON call body → (name, compact arguments); false when it is not a valid call.
bool tool_call_from_json(std::string_view body, std::string* name, std::string* arguments);
// Compact JSON text, invalid UTF-8 replaced.
std::string json_compact(const nlohmann::ordered_json& v);

}  // namespace invar::chat
