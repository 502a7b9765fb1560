#include "server/prompt_limits.h"

#include <string>

#include "server/api_error.h"

namespace invar::server {
namespace {

// An image part's URL (chat_request_parse.cpp's image_part): bytes of an image, not text. Its
// size is bounded by --max-image-bytes and --max-body-bytes, its tokens by its pixel size, which
// the context is checked against from the image's header before it is decoded
// (job_prompt_make).
template <class Json>
bool image_part(const Json& v) {
  auto type = v.find("type");
  return type != v.end() && (*type == "image_url" || *type == "input_image");
}

// The bytes of every string (keys included) in a JSON value, image URLs left out.
template <class Json>
size_t string_bytes(const Json& v) {
  if (v.is_string()) return v.template get_ref<const std::string&>().size();
  size_t n = 0;
  if (v.is_object()) {
    const bool image = image_part(v);
    for (auto it = v.begin(); it != v.end(); ++it)
      n += it.key().size() + (image && it.key() == "image_url" ? 0 : string_bytes(*it));
  } else if (v.is_array()) {
    for (const auto& x : v) n += string_bytes(x);
  }
  return n;
}

[[noreturn]] void too_long(const char* field, size_t bytes, const PromptLimits& lim,
                           const char* what) {
  throw bad_request(field, std::string("'") + field + "' holds " + std::to_string(bytes) +
                               " bytes of " + what + ", more than the context of " +
                               std::to_string(lim.n_ctx) + " tokens can hold (at most " +
                               std::to_string(lim.max_token_bytes) +
                               " bytes a token: " + std::to_string(lim.text_bytes()) + " bytes)");
}

template <class Json>
void check(const Json& body, const PromptLimits& lim) {
  if (!body.is_object()) return;
  if (auto m = body.find("messages"); m != body.end() && m->is_array()) {
    if (int64_t(m->size()) > lim.n_ctx)
      throw bad_request("messages", "'messages' holds " + std::to_string(m->size()) +
                                        " messages, more than the context of " +
                                        std::to_string(lim.n_ctx) +
                                        " tokens (a message takes at least one)");
    if (const size_t b = string_bytes(*m); b > lim.text_bytes())
      too_long("messages", b, lim, "text");
  }
  if (auto t = body.find("tools"); t != body.end())
    if (const size_t b = string_bytes(*t); b > lim.text_bytes())
      too_long("tools", b, lim, "tool definitions");
  if (auto tr = body.find("truncate_prompt_tokens"); tr != body.end() && !tr->is_null()) return;
  auto p = body.find("prompt");
  if (p == body.end()) return;
  // A string, token ids, or a list of them: each prompt is held to the limits.
  const auto one_check = [&lim](const Json& one) {
    if (one.is_string() && string_bytes(one) > lim.text_bytes())
      too_long("prompt", string_bytes(one), lim, "text");
    if (one.is_array() && int64_t(one.size()) > lim.n_ctx)
      throw bad_request("prompt", "'prompt' holds " + std::to_string(one.size()) +
                                      " token ids, more than the context of " +
                                      std::to_string(lim.n_ctx) + " tokens");
  };
  if (p->is_array() && !p->empty() && !(*p)[0].is_number()) {
    for (const Json& one : *p) one_check(one);
  } else {
    one_check(*p);
  }
}

}  // namespace

void prompt_limits_check(const nlohmann::json& body, const PromptLimits& lim) {
  check(body, lim);
}

void prompt_limits_check(const nlohmann::ordered_json& body, const PromptLimits& lim) {
  check(body, lim);
}

}  // namespace invar::server
