// /tokenize and /detokenize (also at /v1/tokenize, /v1/detokenize) in vLLM's and llama-server's
// shapes, told apart by the request:
//   vLLM:
//   POST /tokenize   {"model"?, "prompt": str, "add_special_tokens"?, "return_token_strs"?}
//                 or {"model"?, "messages": [...], "tools"?, "add_generation_prompt"?,
//                     "continue_final_message"?, "chat_template_kwargs"?, "add_special_tokens"?,
//                     "return_token_strs"?}
//                 → {"count", "max_model_len", "tokens"[, "token_strs"]}
//   POST /detokenize {"model", "tokens": [int]} → {"prompt": str}
//   llama-server:
//   POST /tokenize   {"content": str, "add_special"?, "parse_special"?, "with_pieces"?}
//                 → {"tokens": [int]} or, with_pieces, {"tokens": [{"id", "piece"}]}
//   POST /detokenize {"tokens": [int]} (no "model") → {"content": str}
// The tokens are exactly those /v1/completions (prompt) or /v1/chat/completions (messages:
// the chat template, the role-injection guard and all) would feed the model. invar adds no
// BOS/EOS to a prompt, so add_special_tokens and add_special change nothing; they are accepted
// as booleans. parse_special: false keeps special-token text as plain text. token_strs are each
// token's bytes as text (invalid UTF-8 as U+FFFD); a piece is its text when that is whole UTF-8,
// else its bytes as an array of numbers (llama-server's rule).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "server/backend.h"

namespace invar::server {

using ModelCheck = std::function<bool(const std::string& name)>;

// The response body. Throws ApiError (400 naming the field, 404 for an unknown model).
std::string tokenize_api(const Backend& b, std::string_view body, const ModelCheck& known);
std::string detokenize_api(const BackendVocabulary& b, std::string_view body,
                           const ModelCheck& known);

}  // namespace invar::server
