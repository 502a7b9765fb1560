// libFuzzer target: arbitrary bytes as a chat template, rendered over a fixed chat context
// (messages with tool calls, tools, kwargs) with small limits, and its content format detected
// (a walk of the syntax tree that never throws). Any input must end in text or in invar::Error
// (a chat::TemplateError); a crash, a sanitizer report, another exception, a timeout or an
// allocation past -malloc_limit_mb is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "chat/content_format.h"
#include "chat/template.h"

namespace {

const nlohmann::ordered_json& context() {
  static const nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
      {"role": "assistant", "content": "", "reasoning_content": "need a tool",
       "tool_calls": [{"id": "call_1", "type": "function",
                       "function": {"name": "get_weather", "arguments": {"city": "Paris", "n": 1.5}}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
      {"role": "user", "content": "Thanks \u00e9\u65e5"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Get weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                              "required": ["city"]}}}],
    "add_generation_prompt": true, "enable_thinking": false,
    "bos_token": "<s>", "eos_token": "</s>"})");
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  invar::chat::TemplateOptions opt;
  opt.render.max_steps = 200000;
  opt.render.max_alloc_bytes = 64 << 20;
  opt.render.max_string_bytes = 4 << 20;
  (void)invar::chat::content_format_detect(source);
  std::tm now{};
  now.tm_year = 126;
  now.tm_mday = 1;
  try {
    const invar::chat::Template t(source, opt);
    (void)t.render(context(), now);
  } catch (const invar::Error&) {
  }
  return 0;
}
