// Errors: values at the edges, checks inside (STYLE.md 15).
//
// invar::Error is thrown for bad input that reaches an edge (a file, a request, a flag): its
// message names the bad field or offset and is meant for the user. INVAR_CHECK guards invariants:
// a failure is a bug, so it aborts with context instead of unwinding.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace invar {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

[[noreturn]] inline void check_failed(const char* file, int line, const char* cond,
                                      const std::string& msg) {
  std::fprintf(stderr, "invar: internal check failed at %s:%d: %s %s\n", file, line, cond,
               msg.c_str());
  std::abort();
}

}  // namespace invar

// INVAR_CHECK(cond) or INVAR_CHECK(cond, std::string message)
#define INVAR_CHECK(cond, ...)                                                               \
  do {                                                                                       \
    if (!(cond)) ::invar::check_failed(__FILE__, __LINE__, #cond, std::string{__VA_ARGS__}); \
  } while (0)
