// The block structs of ggml's quantised types, byte for byte as ggml-common.h lays them out
// (GGUF stores these blocks back to back, little-endian; F16 fields are IEEE binary16 bits).
// Each weight of a block is w = (scale) · (quant) [− (min)], computed in F32 as core/dequant.cpp
// spells out per type. QK_K = 256 ("super-block") for the K-quants and IQ4_XS.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace invar {

inline constexpr int kQK = 32;          // elements of a legacy block (Q4_0 … Q8_0, IQ4_NL)
inline constexpr int kQK_K = 256;       // elements of a K-quant / IQ4_XS super-block
inline constexpr int kKScaleSize = 12;  // packed 6-bit scales and mins of Q4_K / Q5_K

// w = d · (q − 8), q a nibble; element j in the low nibble of qs[j], j + 16 in the high one.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
// w = d · q + m.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
// w = d · (q − 16), q = nibble | bit j (j + 16 for high nibbles) of the little-endian u32 qh << 4.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// w = d · q + m, q as in Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// w = d · q.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};

// 16 sub-blocks of 16: scales[i] = (min index << 4) | scale index; 2-bit quants, four to a byte.
// w = (d · sc) · q − (dmin · m).
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};
// 16 sub-blocks of 16 with 6-bit signed (offset 32) scales packed into 12 bytes; 2 low bits in qs,
// the third bit in hmask (set = no −4). w = (d · (sc − 32)) · q.
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};
// 8 sub-blocks of 32 with 6-bit scales and mins packed into 12 bytes; 4-bit quants.
// w = (d · sc) · q − (dmin · m).
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qs[kQK_K / 2];
};
// As Q4_K with a fifth bit per quant in qh.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
// 16 sub-blocks of 16 with int8 scales; 6-bit quants (4 low in ql, 2 high in qh), offset 32.
// w = (d · sc) · (q − 32).
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
// w = d · kIQ4NLValues[q], q a nibble laid out as in Q4_0.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
// 8 sub-blocks of 32 with 6-bit scales (4 low bits in scales_l, 2 high in scales_h), offset 32.
// w = (d · (ls − 32)) · kIQ4NLValues[q].
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136);

// The non-linear 4-bit grid of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl).
inline constexpr int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// Scale and min index j (0..7) of a Q4_K / Q5_K block's packed 12 bytes: bytes 0-3 hold scales
// 0-3 (low 6 bits), bytes 4-7 mins 0-3; scales/mins 4-7 take their low 4 bits from bytes 8-11
// and their high 2 bits from the top bits of bytes 0-3 / 4-7.
inline void k4_scale_min(int j, const uint8_t* q, uint8_t& sc, uint8_t& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    m = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Byte offsets of a block's F16 fields (scales d, mins m / dmin) for a quantised type; empty for
// F32/F16/BF16. Tests and benchmarks use it to plant chosen scales in random blocks.
inline std::vector<size_t> quant_f16_offsets(DType t) {
  switch (t) {
    case DType::Q4_0:
      return {offsetof(BlockQ4_0, d)};
    case DType::Q4_1:
      return {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)};
    case DType::Q5_0:
      return {offsetof(BlockQ5_0, d)};
    case DType::Q5_1:
      return {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)};
    case DType::Q8_0:
      return {offsetof(BlockQ8_0, d)};
    case DType::Q2_K:
      return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case DType::Q3_K:
      return {offsetof(BlockQ3_K, d)};
    case DType::Q4_K:
      return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
    case DType::Q5_K:
      return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
    case DType::Q6_K:
      return {offsetof(BlockQ6_K, d)};
    case DType::IQ4_NL:
      return {offsetof(BlockIQ4_NL, d)};
    case DType::IQ4_XS:
      return {offsetof(BlockIQ4_XS, d)};
    default:
      return {};
  }
}

}  // namespace invar
