// Whole-file reads for the edges that load a document, a trace, a vocabulary or a request.
#pragma once

#include <string>

namespace invar {

// The bytes of `path` ("-": standard input). Throws invar::Error "<context>: cannot open
// '<path>'" (no prefix when context is empty) when it cannot be read.
std::string file_read(const std::string& path, const std::string& context = "");

}  // namespace invar
