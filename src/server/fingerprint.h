// system_fingerprint (DESIGN.md §1): two responses with the same fingerprint and the same tokens
// carry the same bits, so it digests everything that decides the bits: the model file and the
// numerics version of this build.
#pragma once

#include <string>
#include <string_view>

#include "core/sha256.h"

namespace invar::server {

using invar::sha256_hex;
// "fp_" + the first 16 hex digits of SHA-256(model_sha256 ":" numerics_version).
std::string system_fingerprint_of(std::string_view model_sha256, std::string_view numerics_version);

}  // namespace invar::server
