// UTF-8 helpers the tokenizer needs at its edges: NFC (the Qwen normaliser), on top of
// validation and lossy decoding (core/utf8.h).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/utf8.h"

namespace invar::utf8 {

// Canonical composition (NFC, not NFKC). s must be valid UTF-8.
std::string nfc(std::string_view s);
// True when NFC cannot change s: every code point is below U+0300, where no character
// decomposes, composes or reorders. Lets ASCII and Latin-1 text skip utf8proc.
bool nfc_trivially_stable(std::string_view s);

}  // namespace invar::utf8
