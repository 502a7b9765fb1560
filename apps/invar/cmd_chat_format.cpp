// `invar chat-format`: a messages JSON -> the prompt text a chat template renders from it.
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "command.h"
#include "core/error.h"
#include "core/file_read.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace invar::app {
namespace {

struct ChatFormatArgs {
  std::string messages, model, template_name;
  bool no_generation_prompt = false, no_thinking = false, ids = false;
};

int run_chat_format(const ChatFormatArgs& a) {
  const std::vector<ChatMessage> msgs = chat_messages_from_json(file_read(a.messages));
  std::unique_ptr<Tokenizer> tok;
  if (!a.model.empty()) tok = Tokenizer::from_file(a.model);
  ChatTemplate t = ChatTemplate::qwen3;
  if (!a.template_name.empty()) {
    t = chat_template_from_name(a.template_name);
  } else if (tok) {
    t = chat_template_identify(tok->vocab().chat_template);
  }
  ChatOptions opts;
  opts.add_generation_prompt = !a.no_generation_prompt;
  if (a.no_thinking) opts.enable_thinking = false;
  const std::string prompt = chat_render(t, msgs, opts);
  if (a.ids) {
    if (!tok) throw Error("--ids needs --model");
    nlohmann::json j = {{"template", chat_template_name(t)},
                        {"text", prompt},
                        {"ids", tok->encode(prompt, /*parse_special=*/true)}};
    std::cout << j.dump() << "\n";
  } else {
    std::cout << prompt;
  }
  return 0;
}

Command chat_format_command("chat-format", [](CLI::App& root) -> Command::Run {
  auto a = std::make_shared<ChatFormatArgs>();
  auto* sub = root.add_subcommand(
      "chat-format",
      "Render chat messages to the exact prompt text of a chat template and print it (no\n"
      "trailing newline is added). Messages: an OpenAI-style JSON array\n"
      "[{\"role\": ..., \"content\": ...}] or a request object holding \"messages\".\n"
      "Templates invar renders exactly: Qwen3's published template (default) and plain\n"
      "ChatML; a model whose template is anything else is refused, never approximated.");
  sub->add_option("--messages", a->messages, "messages JSON file, '-' for stdin")->required();
  sub->add_option("--model", a->model,
                  "MODEL.gguf or tokenizer.json: use (and check) its tokenizer.chat_template");
  sub->add_option("--template", a->template_name, "force a template: qwen3 | chatml");
  sub->add_flag("--no-generation-prompt", a->no_generation_prompt,
                "do not append the assistant turn opener (add_generation_prompt=false)");
  sub->add_flag("--no-thinking", a->no_thinking,
                "enable_thinking=false: Qwen3 appends an empty <think></think> block");
  sub->add_flag("--ids", a->ids,
                "print JSON {template, text, ids} with the prompt tokenized by --model");
  return [a]() -> int { return run_chat_format(*a); };
});

}  // namespace
}  // namespace invar::app
