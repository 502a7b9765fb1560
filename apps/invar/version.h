// What `invar --version` and `invar serve --version` print: the release, the numerics version
// (half of every response's system_fingerprint), the build type and the vector ISA in use.
#pragma once

#include <string>

namespace invar::app {

std::string version_text();

}  // namespace invar::app
