// Random weight matrices of every dtype and bit comparison helpers for the matmul tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/simd.h"
#include "kernels/matmul.h"
#include "quant/blocks.h"
#include "quant/dtype.h"
#include "simd_levels.h"

namespace invar::test {

// A matrix that owns its file-layout bytes.
struct OwnedMatrix {
  std::vector<uint8_t> bytes;
  Matrix m;
};

inline float uniform(std::mt19937& rng, float lo, float hi) {
  return std::uniform_real_distribution<float>(lo, hi)(rng);
}

// A block scale: mostly ordinary, sometimes an F16 subnormal, a large value, zero or negative.
inline float quant_scale(std::mt19937& rng) {
  switch (rng() % 8) {
    case 0:
      return 3e-6f;
    case 1:
      return -uniform(rng, 1e-3f, 2e-2f);
    case 2:
      return 1000.0f;
    case 3:
      return rng() % 2 ? 0.0f : 60000.0f;
    default:
      return uniform(rng, 1e-3f, 2e-2f);
  }
}

// Random {K, N} matrix of `type`; values of either sign and varied magnitude, some exact zeros,
// F16 scales sometimes subnormal, to exercise every conversion. Quantised types other than Q8_0
// get random quants and the scales of quant_scale.
inline OwnedMatrix random_matrix(DType type, int64_t k, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  OwnedMatrix o;
  o.bytes.resize(static_cast<size_t>(n * dtype_row_bytes(type, k)));
  auto value = [&]() {
    const int pick = int(rng() % 16);
    if (pick == 0) return 0.0f;
    if (pick == 1) return -0.0f;
    return uniform(rng, -1.0f, 1.0f) * (pick == 2 ? 1e-3f : 1.0f);
  };
  switch (type) {
    case DType::F32: {
      for (int64_t i = 0; i < k * n; ++i) {
        const float v = value();
        std::memcpy(o.bytes.data() + 4 * i, &v, 4);
      }
      break;
    }
    case DType::F16:
    case DType::BF16: {
      for (int64_t i = 0; i < k * n; ++i) {
        const uint16_t h = type == DType::F16 ? f32_to_f16(value()) : f32_to_bf16(value());
        std::memcpy(o.bytes.data() + 2 * i, &h, 2);
      }
      break;
    }
    default: {
      // Random bits everywhere, then every F16 field set to a finite scale of varied magnitude.
      const int64_t bytes = dtype_block_bytes(type);
      for (auto& b : o.bytes) b = uint8_t(rng());
      const std::vector<size_t> fields = quant_f16_offsets(type);
      for (int64_t b = 0; b < int64_t(o.bytes.size()) / bytes; ++b) {
        uint8_t* blk = o.bytes.data() + b * bytes;
        if (type == DType::IQ1_M) iq1m_scale_set(blk, f32_to_f16(quant_scale(rng)));
        // MXFP4: E8M0 exponents 0 and 1 (subnormal scales) sometimes, else 2^−20 .. 2^10.
        if (type == DType::MXFP4)
          blk[0] = rng() % 8 == 0 ? uint8_t(rng() % 2) : uint8_t(108 + rng() % 31);
        for (size_t off : fields) {
          const uint16_t h = f32_to_f16(quant_scale(rng));
          std::memcpy(o.bytes.data() + b * bytes + off, &h, 2);
        }
      }
      break;
    }
    case DType::Q8_0: {
      for (int64_t b = 0; b < k * n / kQ8Block; ++b) {
        uint8_t* blk = o.bytes.data() + b * kQ8BlockBytes;
        const int pick = int(rng() % 8);
        const float d = pick == 0 ? 3e-6f : uniform(rng, 1e-3f, 2e-2f);  // 3e-6: subnormal in F16
        const uint16_t dh = f32_to_f16(d);
        std::memcpy(blk, &dh, 2);
        for (int j = 0; j < kQ8Block; ++j) blk[2 + j] = uint8_t(int(rng() % 256) - 128);
      }
      break;
    }
  }
  o.m = Matrix(type, k, n, o.bytes.data());
  return o;
}

inline std::vector<float> random_activations(int64_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> x(static_cast<size_t>(count));
  for (auto& v : x) v = uniform(rng, -2.0f, 2.0f);
  return x;
}

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Empty string if a and b hold the same bits; else the first mismatches, for the failure message.
inline std::string bits_diff(const float* a, const float* b, int64_t count, int64_t row_len) {
  std::string out;
  int shown = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (float_bits(a[i]) == float_bits(b[i])) continue;
    ++bad;
    if (shown++ < 5) {
      char buf[160];
      std::snprintf(buf, sizeof buf, " [m=%lld n=%lld] %.9g (0x%08x) vs %.9g (0x%08x);",
                    (long long)(i / row_len), (long long)(i % row_len), a[i], float_bits(a[i]),
                    b[i], float_bits(b[i]));
      out += buf;
    }
  }
  if (bad) out = std::to_string(bad) + " of " + std::to_string(count) + " differ:" + out;
  return out;
}

// The SIMD levels this CPU can run, scalar first (a level INVAR_REQUIRE_SIMD requires and the
// CPU lacks fails the test).
inline std::vector<SimdLevel> available_levels() {
  return simd_levels_to_test();
}

// Restores the process-wide SIMD level when a test ends.
struct SimdRestore {
  SimdLevel saved = simd_active();
  ~SimdRestore() { simd_set(saved); }
};

inline std::string case_name(DType t, SimdLevel l) {
  return std::string(dtype_name(t)) + "/" + std::string(simd_name(l));
}

inline const DType kAllTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0};
inline const DType kQuantTypes[] = {
    DType::Q4_0,    DType::Q4_1,   DType::Q5_0,  DType::Q5_1,    DType::Q8_0,   DType::Q2_K,
    DType::Q3_K,    DType::Q4_K,   DType::Q5_K,  DType::Q6_K,    DType::IQ4_NL, DType::IQ4_XS,
    DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS, DType::IQ3_S,  DType::IQ1_S,
    DType::IQ1_M,   DType::TQ1_0,  DType::TQ2_0, DType::MXFP4};

}  // namespace invar::test
