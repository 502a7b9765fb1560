// `invar chat-format`: an OpenAI chat-completions request -> the exact prompt text the model's
// own chat template (or a given .jinja file) renders from it.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "chat/chat_request.h"
#include "chat/template.h"
#include "command.h"
#include "core/error.h"
#include "core/file_read.h"
#include "tokenizer/tokenizer.h"

namespace invar::app {
namespace {

struct ChatFormatArgs {
  std::string model, template_path, request, now;
  std::string content_format = "auto";
  std::optional<std::string> bos, eos;
  bool json = false;
};

int run_chat_format(const ChatFormatArgs& a) {
  std::string source, bos, eos;
  if (!a.model.empty()) {
    const std::unique_ptr<Tokenizer> tok = Tokenizer::from_file(a.model);
    const Vocab& v = tok->vocab();
    if (v.chat_template.empty()) {
      throw Error("'" + a.model + "' carries no tokenizer.chat_template; pass --template FILE");
    }
    source = v.chat_template;
    if (v.bos_id >= 0 && v.bos_id < tok->n_vocab()) bos = tok->token_bytes(v.bos_id);
    if (v.eos_id >= 0 && v.eos_id < tok->n_vocab()) eos = tok->token_bytes(v.eos_id);
  } else {
    source = file_read(a.template_path);
  }
  if (a.bos) bos = *a.bos;
  if (a.eos) eos = *a.eos;
  nlohmann::ordered_json request;
  try {
    request = nlohmann::ordered_json::parse(file_read(a.request));
  } catch (const nlohmann::json::exception& e) {
    throw Error("--request: not valid JSON: " + std::string(e.what()));
  }
  const chat::ContentFormat format =
      chat::content_format_parse(a.content_format).value_or(chat::content_format_detect(source));
  const nlohmann::ordered_json context = chat::chat_template_context(request, bos, eos, format);
  std::optional<std::tm> now;
  if (!a.now.empty()) now = chat::parse_iso8601(a.now);
  std::string prompt;
  try {
    const chat::Template t(source);
    prompt = t.render(context, now);
  } catch (const chat::TemplateError& e) {
    std::cerr << "invar chat-format: template error: " << e.what() << "\n";
    return 1;
  }
  if (a.json) {
    std::cout << nlohmann::ordered_json{{"prompt", prompt}}.dump(
                     -1, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  } else {
    std::cout << prompt;
  }
  return 0;
}

Command chat_format_command("chat-format", [](CLI::App& root) -> Command::Run {
  auto a = std::make_shared<ChatFormatArgs>();
  auto* sub = root.add_subcommand(
      "chat-format",
      "Render an OpenAI chat-completions request (messages, tools, chat_template_kwargs,\n"
      "add_generation_prompt) through a chat template and print the prompt exactly, with\n"
      "nothing added. The template is the model's own (tokenizer.chat_template) or a .jinja\n"
      "file, rendered as Hugging Face transformers renders it with Python's jinja2.\n"
      "A template error or raise_exception() exits with status 1 and the message.");
  auto* model = sub->add_option("--model", a->model,
                                "MODEL.gguf or tokenizer.json: its chat template, bos and eos");
  auto* tmpl = sub->add_option("--template", a->template_path, "a chat template FILE.jinja");
  model->excludes(tmpl);
  tmpl->excludes(model);
  sub->add_option("--request", a->request, "REQUEST.json, '-' for stdin")->required();
  sub->add_option("--bos-token", a->bos, "bos_token text (default: the model's, else empty)");
  sub->add_option("--eos-token", a->eos, "eos_token text (default: the model's, else empty)");
  sub->add_option("--now", a->now, "the time strftime_now() formats, ISO-8601 (default: now)");
  sub->add_option("--chat-template-content-format", a->content_format,
                  "auto | string | openai: how message content reaches the template, as in "
                  "invar serve")
      ->capture_default_str();
  sub->add_flag("--json", a->json, "print {\"prompt\": ...} instead of the bare prompt");
  sub->callback([model, tmpl] {
    if (model->count() == 0 && tmpl->count() == 0) {
      throw CLI::ValidationError("chat-format", "one of --model or --template is required");
    }
  });
  return [a]() -> int { return run_chat_format(*a); };
});

}  // namespace
}  // namespace invar::app
