// Token types as GGUF's tokenizer.ggml.token_type stores them (llama.cpp's llama_token_type).
#pragma once

#include <cstdint>

namespace invar::token_type {

inline constexpr int32_t kNormal = 1;  // a BPE token: byte-level text
inline constexpr int32_t kUnknown = 2;
inline constexpr int32_t kControl =
    3;  // special added token (<|im_start|>): parsed only on request
inline constexpr int32_t kUserDefined = 4;  // non-special added token (<think>): always parsed
inline constexpr int32_t kUnused = 5;  // padding rows ([PAD151700]): never produced, decodes to ""
inline constexpr int32_t kByte = 6;

}  // namespace invar::token_type
