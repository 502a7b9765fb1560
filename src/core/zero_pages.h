// Buffers that read as zeros from the start without being written. A large block is a fresh
// anonymous mapping: the kernel hands out a zero page the first time each page is touched, so
// allocating it costs neither a memset nor a page fault, and only the part a computation really
// uses ever becomes resident. Working buffers sized for the largest batch (hundreds of MiB for
// 512 rows of a large model) are allocated this way at start-up; a request of a few tokens then
// faults in a few pages of each.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace invar {

// `bytes` of zeros (never null; throws std::bad_alloc). Blocks of at least
// kZeroPagesMapBytes are anonymous mappings, smaller ones come from calloc.
void* zero_pages_alloc(size_t bytes);
void zero_pages_free(void* p, size_t bytes);
inline constexpr size_t kZeroPagesMapBytes = size_t{64} << 10;

// `bytes` of zeros, rounded up to whole 2 MiB pages, in an anonymous mapping that starts on a
// 2 MiB boundary and is advised for transparent huge pages (MADV_HUGEPAGE: a hint, so the pages
// may still be 4 KiB ones). Every page of it can then be huge, which an ordinary mapping's
// unaligned ends forbid. Null on failure (errno set); the mapped length in *mapped_bytes, which
// zero_pages_free takes.
void* huge_pages_alloc(size_t bytes, size_t* mapped_bytes);
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// A std::vector allocator over zero_pages_alloc whose value-initialisation writes nothing: the
// memory is zero already. So resize(n) of a vector that never held more than its size leaves
// zeros without touching them. Unlike std::vector's, a vector shrunk and grown again within its
// capacity shows the old values in the regrown part: callers that need zeros again assign them.
template <class T>
struct ZeroPagesAllocator {
  static_assert(std::is_trivially_default_constructible_v<T> && std::is_trivially_destructible_v<T>,
                "zero bits must be the value-initialised T");
  using value_type = T;

  ZeroPagesAllocator() = default;
  template <class U>
  ZeroPagesAllocator(const ZeroPagesAllocator<U>&) noexcept {}

  T* allocate(size_t n) {
    if (n > size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(zero_pages_alloc(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept { zero_pages_free(p, n * sizeof(T)); }

  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;  // default-initialised: keeps the zeros already there
  }
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }

  template <class U>
  bool operator==(const ZeroPagesAllocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using ZeroedVector = std::vector<T, ZeroPagesAllocator<T>>;

}  // namespace invar
