// Zero-page buffers: they read as zeros, and a large one costs no resident memory until it is
// written (what lets the engine size its working buffers for the largest batch at start-up).
#include "core/zero_pages.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

namespace invar {
namespace zero_pages_test {

// Pages of [p, p + bytes) that are resident (mincore).
size_t resident_pages(const void* p, size_t bytes) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<uintptr_t>(p) / page * page;
  const size_t n = (reinterpret_cast<uintptr_t>(p) + bytes - start + page - 1) / page;
  std::vector<unsigned char> in(n);
  EXPECT_EQ(mincore(reinterpret_cast<void*>(start), n * page, in.data()), 0);
  size_t r = 0;
  for (unsigned char c : in) r += c & 1;
  return r;
}

TEST(ZeroPages, SmallAndLargeBlocksReadAsZeros) {
  for (size_t bytes :
       {size_t{1}, size_t{100}, kZeroPagesMapBytes - 1, kZeroPagesMapBytes, size_t{3} << 20}) {
    auto* p = static_cast<unsigned char*>(zero_pages_alloc(bytes));
    size_t nonzero = 0;
    for (size_t i = 0; i < bytes; ++i) nonzero += p[i] != 0;
    EXPECT_EQ(nonzero, 0u) << bytes;
    p[bytes - 1] = 7;  // writable to the last byte
    zero_pages_free(p, bytes);
  }
}

TEST(ZeroPages, LargeVectorIsResidentOnlyWhereWritten) {
  const size_t n = size_t{64} << 20 >> 2;  // 64 MiB of floats
  ZeroedVector<float> v;
  v.resize(n);
  ASSERT_EQ(v.size(), n);
  EXPECT_LE(resident_pages(v.data(), n * 4), 1u) << "resize wrote the buffer";
  const size_t row = 4096;  // floats of one 16 KiB row
  for (size_t i = 0; i < row; ++i) v[i] = float(i);
  const size_t resident = resident_pages(v.data(), n * 4);
  // The row's 4 pages, or one transparent huge page where the kernel gives them: far from the
  // 16384 pages of the whole buffer.
  EXPECT_GE(resident, 1u);
  EXPECT_LE(resident, (size_t{2} << 20) / size_t(sysconf(_SC_PAGESIZE)) + 4);
  EXPECT_EQ(v[row], 0.0f);
  EXPECT_EQ(v[n - 1], 0.0f);
  EXPECT_EQ(v[row - 1], float(row - 1));
}

TEST(ZeroPages, GrowingKeepsValuesAndAddsZeros) {
  ZeroedVector<int32_t> v(10);
  for (int32_t i = 0; i < 10; ++i) v[size_t(i)] = i + 1;
  v.resize(size_t{1} << 20);  // reallocates: old values copied, the rest fresh zeros
  for (int32_t i = 0; i < 10; ++i) EXPECT_EQ(v[size_t(i)], i + 1);
  int64_t sum = 0;
  for (size_t i = 10; i < v.size(); ++i) sum += v[i];
  EXPECT_EQ(sum, 0);
  v.assign(5, 3);  // explicit values are written as given
  EXPECT_EQ(v.size(), 5u);
  EXPECT_EQ(v[4], 3);
}

}  // namespace zero_pages_test
}  // namespace invar
