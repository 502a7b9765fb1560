// The numerics version of this build: bumped whenever any change can alter a logit bit
// (kernel order, detmath constants, forward math). It is folded into `system_fingerprint`
// (DESIGN.md §1) so that equal fingerprints promise equal bits.
#pragma once

namespace invar {

inline constexpr const char* kNumericsVersion = "invar-numerics-3";

}  // namespace invar
