#include "server/tokenize_api.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/utf8.h"
#include "server/api_error.h"
#include "server/chat_request_parse.h"
#include "server/json_fields.h"
#include "server/prompt_limits.h"

namespace invar::server {
namespace {

using ojson = nlohmann::ordered_json;

ojson body_parse(std::string_view text, const ModelCheck& known) {
  ojson body = json_body_parse(text);
  if (auto m = body.find("model"); m != body.end() && !m->is_null()) {
    if (!m->is_string()) throw bad_request("model", "'model' must be a string");
    if (!known(m->get<std::string>()))
      throw not_found("the model '" + echo_cut(m->get<std::string>()) + "' does not exist",
                      "model_not_found");
  }
  return body;
}

bool flag(const ojson& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return false;
  if (!it->is_boolean()) throw bad_request(name, std::string("'") + name + "' must be a boolean");
  return it->get<bool>();
}

std::string dumped(const ojson& j) {
  return j.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

// llama-server's form: {"content": str, "add_special"?, "parse_special"?, "with_pieces"?}
// → {"tokens": [id] | [{"id", "piece"}]}.
std::string tokenize_content(const Backend& b, const ojson& body) {
  if (body.contains("prompt") || body.contains("messages"))
    throw bad_request("content", "give exactly one of 'prompt', 'messages' and 'content'");
  for (const auto& [k, v] : body.items())
    if (k != "content" && k != "add_special" && k != "parse_special" && k != "with_pieces" &&
        k != "model")
      throw bad_request(k, "unknown field '" + k +
                               "' for the llama-server form of /tokenize (content, add_special, "
                               "parse_special, with_pieces)");
  if (!body["content"].is_string()) throw bad_request("content", "'content' must be a string");
  flag(body, "add_special");  // validated: Qwen vocabularies add no BOS, the same tokens either way
  // llama-server's default: special-token text becomes its token, as in every other endpoint.
  const bool parse_special = !body.contains("parse_special") || body["parse_special"].is_null() ||
                             flag(body, "parse_special");
  const bool pieces = flag(body, "with_pieces");
  std::vector<int32_t> tokens;
  try {
    const std::string text = body["content"].get<std::string>();
    tokens = parse_special ? b.encode(text) : b.encode_plain(text);
  } catch (const Error& e) {
    throw bad_request("content", e.what());
  }
  ojson list = ojson::array();
  for (int32_t id : tokens) {
    if (!pieces) {
      list.push_back(id);
      continue;
    }
    // A piece that is not whole UTF-8 (part of a character) is its bytes, as llama-server sends it.
    const std::string bytes = b.token_bytes(id);
    ojson piece = bytes;
    if (utf8::first_invalid(bytes) != bytes.size()) {
      piece = ojson::array();
      for (unsigned char c : bytes) piece.push_back(int(c));
    }
    list.push_back({{"id", id}, {"piece", std::move(piece)}});
  }
  return dumped({{"tokens", std::move(list)}});
}

}  // namespace

std::string tokenize_api(const Backend& b, std::string_view text, const ModelCheck& known) {
  const ojson body = body_parse(text, known);
  if (body.contains("content") && !body["content"].is_null()) return tokenize_content(b, body);
  flag(body, "add_special_tokens");  // validated; see the header
  const bool strs = flag(body, "return_token_strs");
  const bool has_prompt = body.contains("prompt") && !body["prompt"].is_null();
  const bool has_messages = body.contains("messages") && !body["messages"].is_null();
  if (has_prompt == has_messages)
    throw bad_request(has_prompt ? "messages" : "prompt",
                      "give exactly one of 'prompt' and 'messages' (or llama-server's 'content')");
  // Before the messages are validated, rendered or tokenised (prompt_limits.h).
  prompt_limits_check(body, {b.n_ctx(), b.max_token_bytes()});
  std::vector<int32_t> tokens;
  try {
    if (has_prompt) {
      if (!body["prompt"].is_string()) throw bad_request("prompt", "'prompt' must be a string");
      tokens = b.encode(body["prompt"].get_ref<const std::string&>());
    } else {
      const ChatInput in = chat_request_parse(body);
      // An image's token count is its decoded size's: a count made without decoding it would
      // be another prompt than the one a completion reads.
      if (!in.images.empty())
        throw bad_request(in.images[0].field,
                          "/tokenize does not read images; a completion's usage.prompt_tokens "
                          "counts an image's tokens");
      if (!b.chat_template())
        throw bad_request("messages",
                          "this model carries no chat template (tokenizer.chat_template): start "
                          "the server with --chat-template FILE");
      tokens = b.chat_encode(in).tokens;
    }
  } catch (const Error& e) {
    throw bad_request(has_prompt ? "prompt" : "messages", e.what());
  }
  ojson out = {{"count", tokens.size()}, {"max_model_len", b.n_ctx()}, {"tokens", tokens}};
  if (strs) {
    ojson s = ojson::array();
    for (int32_t id : tokens) s.push_back(utf8::lossy(b.token_bytes(id)));
    out["token_strs"] = std::move(s);
  }
  return dumped(out);
}

std::string detokenize_api(const BackendVocabulary& b, std::string_view text,
                           const ModelCheck& known) {
  const ojson body = body_parse(text, known);
  auto it = body.find("tokens");
  if (it == body.end() || !it->is_array())
    throw bad_request("tokens", "'tokens' must be an array of token ids");
  std::string bytes;
  for (size_t i = 0; i < it->size(); ++i) {
    const ojson& t = (*it)[i];
    const std::string name = "tokens[" + std::to_string(i) + "]";
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= b.n_vocab())
      throw bad_request(name, "'" + name + "' is not a token id (vocabulary size " +
                                  std::to_string(b.n_vocab()) + ")");
    bytes += b.token_bytes(int32_t(t.get<int64_t>()));
  }
  // vLLM's requests name the model; llama-server's do not.
  const bool vllm = body.contains("model") && !body["model"].is_null();
  return dumped({{vllm ? "prompt" : "content", utf8::lossy(bytes)}});
}

}  // namespace invar::server
