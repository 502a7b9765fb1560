// quant/iq_grids.h, the generated lookup tables of the low-bit types: (1) equal to what
// scripts/gen-iq-grids.py makes of ggml's ggml-common.h, in a build that found that file
// (INVAR_GGML_COMMON_H, tests/quant/CMakeLists.txt; ggml is not part of the repository); (2) in
// every build, the SHA-256 of all tables' bytes against the digest ggml-common.h's tables give,
// the sizes, a hash of each table's bytes, and the structural facts the dequantisers rely on
// (magnitudes and ±1 values, even sign parity).
#include "quant/iq_grids.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "command_run.h"
#include "core/sha256.h"

namespace invar {
namespace iq_grids_test {

template <class T, size_t N>
uint64_t fnv1a(const T (&table)[N]) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* p = reinterpret_cast<const uint8_t*>(table);
  for (size_t i = 0; i < sizeof(T) * N; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

template <class T, size_t N>
void append_bytes(std::string& out, const T (&table)[N]) {
  out.append(reinterpret_cast<const char*>(table), sizeof(T) * N);
}

// The SHA-256 of every table's little-endian bytes, in the order of gen-iq-grids.py's TABLES,
// equals that of ggml-common.h's tables (computed from llama.cpp's ggml/src/ggml-common.h with
// the script's parse_tables, packed little-endian): the committed tables are ggml's, checked
// without ggml's source.
TEST(IqGrids, TablesDigestIsGgmlCommons) {
  std::string bytes;
  append_bytes(bytes, kIQ2SignsTable);
  append_bytes(bytes, kIQ2XXSGrid);
  append_bytes(bytes, kIQ2XSGrid);
  append_bytes(bytes, kIQ2SGrid);
  append_bytes(bytes, kIQ3XXSGrid);
  append_bytes(bytes, kIQ3SGrid);
  append_bytes(bytes, kIQ1SGrid);
  append_bytes(bytes, kMXFP4Values);
  EXPECT_EQ(sha256_hex(bytes), "bbabab96651b203caa1307e0223c8bea2ab7016d348c79519f6decc4263c94cc");
}

#ifdef INVAR_GGML_COMMON_H
// INVAR_GGML_COMMON_H in the environment, else the file the build found.
std::string ggml_common_path() {
  const char* env = std::getenv("INVAR_GGML_COMMON_H");
  return env && *env ? env : INVAR_GGML_COMMON_H;
}

TEST(IqGrids, HeaderIsTheGeneratorsOutputOfGgmlCommon) {
  const std::string common = ggml_common_path();
  ASSERT_TRUE(std::ifstream(common).good()) << "no ggml-common.h at " << common;
  const std::string out = ::testing::TempDir() + "iq_grids_generated.h";
  const auto r = test::command_run(std::string(INVAR_PYTHON3) +
                                   " " INVAR_SOURCE_DIR "/scripts/gen-iq-grids.py " + common + " " +
                                   out + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string generated = read_all(out);
  std::remove(out.c_str());
  const std::string committed = read_all(INVAR_SOURCE_DIR "/src/quant/iq_grids.h");
  ASSERT_FALSE(committed.empty());
  EXPECT_TRUE(generated == committed)
      << "src/quant/iq_grids.h differs from scripts/gen-iq-grids.py " << common
      << " (regenerate it)";
}
#endif

TEST(IqGrids, TablesHaveTheirRecordedContents) {
  EXPECT_EQ(fnv1a(kIQ2SignsTable), 0xf19ba8f8c3292ba5ull);
  EXPECT_EQ(fnv1a(kIQ2XXSGrid), 0xbb4ee025b5ac6e8eull);
  EXPECT_EQ(fnv1a(kIQ2XSGrid), 0xc9b1ee61e79909bdull);
  EXPECT_EQ(fnv1a(kIQ2SGrid), 0x123edd38a3b62b90ull);
  EXPECT_EQ(fnv1a(kIQ3XXSGrid), 0xdfa5dc83d6a155d5ull);
  EXPECT_EQ(fnv1a(kIQ3SGrid), 0xfa37020c25b44829ull);
  EXPECT_EQ(fnv1a(kIQ1SGrid), 0x6703ed863501ae2eull);
  EXPECT_EQ(fnv1a(kMXFP4Values), 0x3f0e3c08af1e5eb5ull);
  static_assert(std::size(kIQ2SignsTable) == 128 && std::size(kIQ2XXSGrid) == 256);
  static_assert(std::size(kIQ2XSGrid) == 512 && std::size(kIQ2SGrid) == 1024);
  static_assert(std::size(kIQ3XXSGrid) == 256 && std::size(kIQ3SGrid) == 512);
  static_assert(std::size(kIQ1SGrid) == 2048 && std::size(kMXFP4Values) == 16);
}

// Every byte of a grid entry is one of the type's magnitudes; `ok` says which.
template <class T, size_t N, class Ok>
int bad_bytes(const T (&grid)[N], Ok ok) {
  int bad = 0;
  for (T e : grid)
    for (size_t j = 0; j < sizeof(T); ++j) bad += !ok(int(uint8_t(e >> (8 * j))));
  return bad;
}

TEST(IqGrids, EntriesAreTheTypesValues) {
  auto iq2 = [](int v) { return v == 8 || v == 25 || v == 43; };
  EXPECT_EQ(bad_bytes(kIQ2XXSGrid, iq2), 0);
  EXPECT_EQ(bad_bytes(kIQ2XSGrid, iq2), 0);
  EXPECT_EQ(bad_bytes(kIQ2SGrid, iq2), 0);
  EXPECT_EQ(bad_bytes(kIQ3XXSGrid, [](int v) { return v >= 4 && v <= 62 && v % 2 == 0; }), 0);
  EXPECT_EQ(bad_bytes(kIQ3SGrid, [](int v) { return v >= 1 && v <= 15 && v % 2 == 1; }), 0);
  EXPECT_EQ(bad_bytes(kIQ1SGrid, [](int v) { return v == 0xff || v == 0 || v == 1; }), 0);
  // The sign table: low 7 bits are the index, bit 7 makes the number of set bits even.
  for (int i = 0; i < 128; ++i) {
    EXPECT_EQ(kIQ2SignsTable[i] & 127, i);
    EXPECT_EQ(__builtin_popcount(kIQ2SignsTable[i]) % 2, 0) << i;
  }
  // E2M1 doubled: codes 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6 times 2, codes 8..15 their negatives.
  const int e2m1x2[8] = {0, 1, 2, 3, 4, 6, 8, 12};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(kMXFP4Values[i], e2m1x2[i]);
    EXPECT_EQ(kMXFP4Values[i + 8], -e2m1x2[i]);
  }
}

}  // namespace iq_grids_test
}  // namespace invar
