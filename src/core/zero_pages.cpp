#include "core/zero_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
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

void* huge_pages_alloc(size_t bytes, size_t* mapped_bytes) {
  const size_t len =
      (std::max(bytes, size_t{1}) + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  // Map one page more than needed, then trim to the 2 MiB aligned part [at, at + len).
  void* raw = ::mmap(nullptr, len + kHugePageBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t r = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t at = (r + kHugePageBytes - 1) & ~uintptr_t(kHugePageBytes - 1);
  if (at > r) ::munmap(raw, at - r);
  ::munmap(reinterpret_cast<void*>(at + len), r + kHugePageBytes - at);  // at < r + 2 MiB
  void* region = reinterpret_cast<void*>(at);
#ifdef MADV_HUGEPAGE
  ::madvise(region, len, MADV_HUGEPAGE);  // a hint: without it the memory is still correct
#endif
  *mapped_bytes = len;
  return region;
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
