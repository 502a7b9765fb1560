#include "version.h"

#include "core/activations.h"
#include "core/numerics_version.h"
#include "core/simd.h"

namespace invar::app {

namespace {

// The active profile's version; the f32 default also names the q8 profile's.
std::string numerics_of_profile() {
  const ActivationProfile a = activations_active();
  std::string s(numerics_version_of(a));
  if (a == ActivationProfile::f32)
    s += std::string(" (--activations q8: ") + kNumericsVersionQ8 + ")";
  return s;
}

}  // namespace

std::string version_text() {
#if defined(__x86_64__)
  const char* arch = "x86-64";
#elif defined(__aarch64__)
  const char* arch = "aarch64";
#else
  const char* arch = "unknown";
#endif
  return std::string("invar ") + INVAR_VERSION + "\nnumerics: " + numerics_of_profile() +
         "\nbuild: " + INVAR_BUILD_TYPE + "\nisa: " + arch + ", kernels use " +
         std::string(simd_name(simd_active())) +
         " (best on this CPU: " + std::string(simd_name(simd_detect())) + ")";
}

}  // namespace invar::app
