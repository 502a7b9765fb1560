#include "version.h"

#include "core/numerics_version.h"
#include "core/simd.h"

namespace invar::app {

std::string version_text() {
#if defined(__x86_64__)
  const char* arch = "x86-64";
#elif defined(__aarch64__)
  const char* arch = "aarch64";
#else
  const char* arch = "unknown";
#endif
  return std::string("invar ") + INVAR_VERSION + "\nnumerics: " + kNumericsVersion +
         "\nbuild: " + INVAR_BUILD_TYPE + "\nisa: " + arch + ", kernels use " +
         std::string(simd_name(simd_active())) +
         " (best on this CPU: " + std::string(simd_name(simd_detect())) + ")";
}

}  // namespace invar::app
