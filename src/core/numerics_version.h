// The numerics version of this build: bumped whenever any change can alter a logit bit
// (kernel order, detmath constants, forward math). It is folded into `system_fingerprint`
// (DESIGN.md §1) so that equal fingerprints promise equal bits.
#pragma once

namespace invar {

inline constexpr const char* kNumericsVersion = "invar-numerics-3";
// The opt-in `--activations q8` profile (core/activations.h): its own bits, its own version.
inline constexpr const char* kNumericsVersionQ8 = "invar-numerics-3-q8.1";

}  // namespace invar
