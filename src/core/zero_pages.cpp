#include "core/zero_pages.h"

#include <sys/mman.h>

#include <cstdlib>

namespace invar {

void* zero_pages_alloc(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes < kZeroPagesMapBytes) {
    void* p = std::calloc(1, bytes);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return p;
}

void zero_pages_free(void* p, size_t bytes) {
  if (!p) return;
  if (bytes == 0) bytes = 1;
  if (bytes < kZeroPagesMapBytes)
    std::free(p);
  else
    ::munmap(p, bytes);
}

}  // namespace invar
