// dequant_row against two independent references, bit for bit (uint32 patterns, so −0 ≠ +0):
//   1. tests/quant/quant_reference.py, numpy written from the block layouts, on random blocks
//      whose F16 scales include the extremes (±max, smallest subnormal, largest subnormal,
//      smallest normal, ±0);
//   2. fixed vectors: blocks dequantised by ggml's own dequantize_row_* (ggml-quants.c built with
//      -ffp-contract=off), stored in tests/data/quant/ggml_fixed_vectors.bin and (the IQ1 / IQ2 /
//      IQ3 / TQ types and MXFP4, by scripts/gen-ggml-fixed-vectors) ggml_lowbit_vectors.bin.
#include "quant/dequant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "command_run.h"
#include "quant/blocks.h"
#include "quant/dtype.h"

namespace invar {
namespace quant_dequant_test {

const DType kQuantTypes[] = {
    DType::Q4_0,    DType::Q4_1,   DType::Q5_0,  DType::Q5_1,    DType::Q8_0,   DType::Q2_K,
    DType::Q3_K,    DType::Q4_K,   DType::Q5_K,  DType::Q6_K,    DType::IQ4_NL, DType::IQ4_XS,
    DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS, DType::IQ3_S,  DType::IQ1_S,
    DType::IQ1_M,   DType::TQ1_0,  DType::TQ2_0, DType::MXFP4};

uint64_t splitmix(uint64_t& s) {
  uint64_t x = (s += 0x9e3779b97f4a7c15ull);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// F16 scales the first blocks get: +max, −max, smallest subnormal, largest subnormal, smallest
// normal, +0, −0, −1, −smallest subnormal.
constexpr uint16_t kExtremes[] = {0x7bff, 0xfbff, 0x0001, 0x03ff, 0x0400,
                                  0x0000, 0x8000, 0xbc00, 0x8001};
constexpr int kExtremeBlocks = int(sizeof kExtremes / sizeof kExtremes[0]);
// MXFP4's E8M0 exponents for the first blocks: the subnormal halves 2^-128 and 2^-127, the
// smallest normal, 1.0's neighbours, the largest finite and 255 (2^127 in ggml: 12 · 2^127 = inf).
constexpr uint8_t kE8M0Extremes[kExtremeBlocks] = {0, 1, 2, 126, 127, 128, 253, 254, 255};

// n random blocks. Block i < kExtremeBlocks has every scale field (d, and dmin / m where the
// type has one) set to kExtremes[i]; the next kExtremeBlocks mix extremes (field k gets
// kExtremes[(i + k) % N]); the others have random finite F16 of either sign.
std::vector<uint8_t> random_blocks(DType t, int n, uint64_t seed) {
  const int64_t bb = dtype_block_bytes(t);
  std::vector<uint8_t> b(size_t(bb * n));
  for (auto& x : b) x = uint8_t(splitmix(seed));
  for (int i = 0; i < n; ++i) {
    uint8_t* blk = &b[size_t(i * bb)];
    if (t == DType::MXFP4) {
      blk[0] = i < kExtremeBlocks ? kE8M0Extremes[i] : uint8_t(100 + splitmix(seed) % 56);
      continue;
    }
    if (t == DType::IQ1_M) {  // its F16 d is split over the scales' top nibbles
      const uint64_t r = splitmix(seed);
      iq1m_scale_set(blk, i < kExtremeBlocks ? kExtremes[i]
                                             : uint16_t((r & 0x83ff) | (((r >> 16) % 31) << 10)));
      continue;
    }
    int k = 0;
    for (size_t off : quant_f16_offsets(t)) {
      uint16_t h;
      if (i < kExtremeBlocks) {
        h = kExtremes[i];
      } else if (i < 2 * kExtremeBlocks) {
        h = kExtremes[(i + k) % kExtremeBlocks];
      } else {
        const uint64_t r = splitmix(seed);
        h = uint16_t((r & 0x83ff) | (((r >> 16) % 31) << 10));  // exponent 0..30: finite
      }
      std::memcpy(&b[size_t(i * bb + off)], &h, 2);
      ++k;
    }
  }
  return b;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// First mismatch as "element i: got 0x… (v) want 0x… (v)", or "" if none.
std::string first_mismatch(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size())
    return "size " + std::to_string(got.size()) + " vs " + std::to_string(want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (bits(got[i]) != bits(want[i])) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "element %zu: got 0x%08x (%g) want 0x%08x (%g)", i,
                    bits(got[i]), double(got[i]), bits(want[i]), double(want[i]));
      return buf;
    }
  }
  return "";
}

TEST(QuantDequant, MatchesNumpyReferenceBitForBit) {
  const std::string script = std::string(INVAR_SOURCE_DIR) + "/tests/quant/quant_reference.py";
  for (DType t : kQuantTypes) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const int n_blocks = 64;
    const std::vector<uint8_t> blocks = random_blocks(t, n_blocks, 1000 + uint64_t(t));
    const std::string in = ::testing::TempDir() + "quant_in_" + std::string(dtype_name(t));
    const std::string out = in + ".f32";
    std::ofstream(in, std::ios::binary)
        .write(reinterpret_cast<const char*>(blocks.data()), std::streamsize(blocks.size()));
    const auto r = test::command_run(std::string(INVAR_PYTHON3) + " " + script + " " +
                                     std::string(dtype_name(t)) + " " + in + " " + out + " 2>&1");
    ASSERT_EQ(r.status, 0) << "the numpy reference did not run (python3-numpy is installed by "
                              "scripts/install-deps): "
                           << r.out;
    const std::vector<uint8_t> raw = read_all(out);
    std::remove(in.c_str());
    std::remove(out.c_str());
    const int64_t n = n_blocks * dtype_block_size(t);
    ASSERT_EQ(int64_t(raw.size()), n * 4);
    std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
    std::memcpy(want.data(), raw.data(), raw.size());
    dequant_row(t, blocks.data(), got.data(), n);
    EXPECT_EQ(first_mismatch(got, want), "");

    // The extremes really occurred: huge and tiny magnitudes, and a −0 next to +0 (MXFP4 has no
    // −0: its two zero codes are the integer 0 times a positive scale).
    bool huge = false, tiny = false, neg_zero = false, pos_zero = false;
    for (float v : got) {
      huge |= std::fabs(v) >= 65504.0f;
      tiny |= v != 0 && std::fabs(v) < 0x1p-14f;  // below F16's smallest normal
      neg_zero |= bits(v) == 0x80000000u;
      pos_zero |= bits(v) == 0;
    }
    if (t == DType::MXFP4) neg_zero = true;
    EXPECT_TRUE(huge && tiny && neg_zero && pos_zero)
        << "huge " << huge << " tiny " << tiny << " -0 " << neg_zero << " +0 " << pos_zero;
  }
}

// File layout: per type, u32 name length, name, u32 block count, the blocks, then the F32 values
// ggml's dequantize_row_* produced for them. Returns the number of types the file held.
int check_fixed_vectors(const std::string& file) {
  const std::vector<uint8_t> f = read_all(std::string(INVAR_TEST_DATA_DIR) + "/quant/" + file);
  EXPECT_FALSE(f.empty()) << file;
  size_t at = 0;
  auto u32 = [&] {
    uint32_t v;
    (void)f.at(at + 3);  // throws past the end
    std::memcpy(&v, &f[at], 4);
    at += 4;
    return v;
  };
  int types_seen = 0;
  while (at < f.size()) {
    const uint32_t len = u32();
    const std::string name(reinterpret_cast<const char*>(&f.at(at)), len);
    at += len;
    SCOPED_TRACE(file + ": " + name);
    const auto t = dtype_parse(name);
    if (!t.has_value()) {
      ADD_FAILURE() << "unknown type";
      return types_seen;
    }
    const uint32_t nb = u32();
    const int64_t n = int64_t(nb) * dtype_block_size(*t);
    const size_t bytes = size_t(nb * dtype_block_bytes(*t));
    if (at + bytes + size_t(n) * 4 > f.size()) {
      ADD_FAILURE() << "truncated";
      return types_seen;
    }
    std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
    std::memcpy(want.data(), &f[at + bytes], size_t(n) * 4);
    dequant_row(*t, &f[at], got.data(), n);
    EXPECT_EQ(first_mismatch(got, want), "");
    at += bytes + size_t(n) * 4;
    ++types_seen;
  }
  return types_seen;
}

TEST(QuantDequant, MatchesGgmlFixedVectors) {
  EXPECT_EQ(check_fixed_vectors("ggml_fixed_vectors.bin"), 12);
  EXPECT_EQ(check_fixed_vectors("ggml_lowbit_vectors.bin"), 10);
}

TEST(QuantDequant, PlainTypesWidenExactly) {
  const uint16_t h[4] = {0x3c00, 0x8001, 0x7bff, 0xc000};  // 1, −2^-24, 65504, −2
  float y[4];
  dequant_row(DType::F16, h, y, 4);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -0x1p-24f);
  EXPECT_EQ(y[2], 65504.0f);
  EXPECT_EQ(y[3], -2.0f);
  dequant_row(DType::BF16, h, y, 4);
  EXPECT_EQ(y[0], bf16_to_f32(0x3c00));
}

}  // namespace quant_dequant_test
}  // namespace invar
