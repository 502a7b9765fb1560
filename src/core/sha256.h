// SHA-256 as lower-case hex: model identity, fingerprints and the run digests (docs/digest.md).
#pragma once

#include <string>
#include <string_view>

namespace invar {

std::string sha256_hex(std::string_view bytes);

}  // namespace invar
