// `invar tokenize`: text -> token ids (or ids -> text) with a model's or a tokenizer.json's
// vocabulary.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "command.h"
#include "core/error.h"
#include "core/file_read.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace invar::app {
namespace {

struct TokenizeArgs {
  std::string source, text, file, decode;
  bool json = false, special = false;
};

// "1,2,3", "1 2 3" or "[1, 2, 3]".
std::vector<int32_t> decode_ids_parse(const std::string& s) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == ',' || c == '[' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++i;
      continue;
    }
    size_t j = i;
    if (s[j] == '-') ++j;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
    if (j == i || (j == i + 1 && s[i] == '-')) {
      throw Error("--decode: expected token ids separated by commas or spaces, found '" +
                  s.substr(i, 12) + "'");
    }
    const long long v = std::stoll(s.substr(i, j - i));
    if (v < INT32_MIN || v > INT32_MAX)
      throw Error("--decode: id " + s.substr(i, j - i) + " out of range");
    ids.push_back(static_cast<int32_t>(v));
    i = j;
  }
  return ids;
}

int run_tokenize(const TokenizeArgs& a) {
  const auto tok = Tokenizer::from_file(a.source);
  if (!a.decode.empty()) {
    const std::string text = utf8::lossy(tok->decode(decode_ids_parse(a.decode)));
    if (a.json) {
      std::cout << nlohmann::json({{"text", text}}).dump() << "\n";
    } else {
      std::cout << text << "\n";
    }
    return 0;
  }
  const std::string text = a.file.empty() ? a.text : file_read(a.file);
  const std::vector<int32_t> ids = tok->encode(text, a.special);
  if (a.json) {
    nlohmann::json pieces = nlohmann::json::array();
    for (int32_t id : ids) pieces.push_back(utf8::lossy(tok->token_bytes(id)));
    std::cout << nlohmann::json({{"ids", ids}, {"n_tokens", ids.size()}, {"pieces", pieces}}).dump()
              << "\n";
  } else {
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
    std::cout << line << "\n";
  }
  return 0;
}

Command tokenize_command("tokenize", [](CLI::App& root) -> Command::Run {
  auto a = std::make_shared<TokenizeArgs>();
  auto* sub = root.add_subcommand(
      "tokenize",
      "Print the token ids of a text (or, with --decode, the text of token ids) using the\n"
      "vocabulary of a GGUF model or a Hugging Face tokenizer.json (tokenizer_config.json\n"
      "beside it is read too). Qwen byte-level BPE: NFC, the Qwen split regex, merges by rank.");
  sub->add_option("source", a->source, "MODEL.gguf or tokenizer.json")->required();
  auto* text = sub->add_option("--text", a->text, "text to tokenize");
  auto* file = sub->add_option("--file", a->file, "file whose bytes to tokenize ('-' for stdin)");
  auto* dec =
      sub->add_option("--decode", a->decode,
                      "token ids to turn back into text: \"1,2,3\", \"1 2 3\" or \"[1,2,3]\"; "
                      "invalid UTF-8 prints as U+FFFD");
  text->excludes(file)->excludes(dec);
  file->excludes(dec);
  sub->add_flag("--json", a->json,
                "print JSON: {\"ids\", \"n_tokens\", \"pieces\"} (or {\"text\"} with --decode)");
  sub->add_flag("--special", a->special,
                "parse special-token text such as <|im_start|> as the special token (without\n"
                "it only non-special added tokens like <think> are matched)");
  return [a, sub]() -> int {
    if (sub->count("--text") + sub->count("--file") + sub->count("--decode") != 1) {
      throw Error("give exactly one of --text, --file or --decode");
    }
    return run_tokenize(*a);
  };
});

}  // namespace
}  // namespace invar::app
