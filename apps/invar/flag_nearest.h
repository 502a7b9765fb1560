// The known flag nearest to a mistyped one (flag_hint.h words the hint): pure, so the tests
// link it without CLI11.
#pragma once

#include <string>
#include <vector>

namespace invar::app {

// The name of `known` nearest to `given` (edit distance over the names without their dashes, a
// swap of neighbours counting one, at most max(1, length / 3); else the shortest name `given`
// begins), or "" when none is near.
std::string flag_nearest(const std::string& given, const std::vector<std::string>& known);

}  // namespace invar::app
