// The numerics profile of the matrix products' activations, chosen once at start-up
// (`--activations f32|q8`, default f32; docs/numerics.md "The q8 profile"). Both profiles keep
// the whole contract; they give different bits, so each has its own numerics version, and
// `system_fingerprint` names the one a process runs.
#pragma once

#include <optional>
#include <string_view>

namespace invar {

enum class ActivationProfile {
  f32 = 0,  // activations stay F32, every weight dequantised exactly (rule N7)
  q8 = 1,   // activations of Q4_K/Q5_K/Q6_K/Q8_0 products quantised to 8 bits, integer dots
};

// The profile matrix products use now. Defaults to f32.
ActivationProfile activations_active();
void activations_set(ActivationProfile profile);
// "f32", "q8"; nullopt otherwise.
std::optional<ActivationProfile> activations_parse(std::string_view s);
std::string_view activations_name(ActivationProfile profile);
// The numerics version of this build under `profile` (kNumericsVersion for f32): what
// `system_fingerprint` digests.
std::string_view numerics_version_of(ActivationProfile profile);

}  // namespace invar
