// The block structs of ggml's quantised types, byte for byte as ggml-common.h lays them out
// (GGUF stores these blocks back to back, little-endian; F16 fields are IEEE binary16 bits).
// Each weight of a block is w = (scale) · (quant) [− (min)], computed in F32 as quant/dequant.cpp
// spells out per type. QK_K = 256 ("super-block") for the K-quants and the IQ / TQ types but
// IQ4_NL. The lattice grids and sign tables of the IQ1 / IQ2 / IQ3 types are in quant/iq_grids.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "quant/dtype.h"

namespace invar {

inline constexpr int kQK = 32;          // elements of a legacy block (Q4_0 … Q8_0, IQ4_NL, MXFP4)
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

// The low-bit types. "Sub-block" is 32 weights, "group" 8 (IQ2 / IQ1: one grid entry) or 4 (IQ3:
// one grid entry; a group of 8 takes two). Grid entries are unsigned magnitudes (IQ2, IQ3) with
// separate signs, or signed −1 / 0 / +1 (IQ1). Scales per sub-block s are small integers
// (4 bits unless noted); every product below is exact in F32.

// qs as 8 u32 pairs per block, one pair per sub-block: the first u32's 4 bytes index
// kIQ2XXSGrid (group l = byte l); the second holds the 4-bit scale s in bits 28..31 and 4 × 7
// sign bits (group l: bits 7l..7l+6, expanded by kIQ2SignsTable). w = ((d · (0.5 + s)) · 0.25) ·
// grid · sign.
struct BlockIQ2_XXS {
  uint16_t d;
  uint16_t qs[kQK_K / 8];
};
// qs[4·sub + l]: bits 0..8 index kIQ2XSGrid, bits 9..15 the 7 sign bits; scales[sub]: low nibble
// for groups 0-1, high for 2-3. w = ((d · (0.5 + s)) · 0.25) · grid · sign.
struct BlockIQ2_XS {
  uint16_t d;
  uint16_t qs[kQK_K / 8];
  uint8_t scales[kQK_K / 32];
};
// Group l of sub-block j: index qs[4j + l] | bits 2l..2l+1 of qh[j] as bits 8..9 (kIQ2SGrid),
// sign bits qs[32 + 4j + l] (all 8 stored); scales[j] nibbles as IQ2_XS.
// w = ((d · (0.5 + s)) · 0.25) · grid · sign.
struct BlockIQ2_S {
  uint16_t d;
  uint8_t qs[kQK_K / 4];
  uint8_t qh[kQK_K / 32];
  uint8_t scales[kQK_K / 32];
};
// qs[0..64): 8 kIQ3XXSGrid indices per sub-block (two per group of 8); qs[64 + 4j ..] a u32 with
// the scale in bits 28..31 and 4 × 7 sign bits as IQ2_XXS. w = ((d · (0.5 + s)) · 0.5) · grid ·
// sign.
struct BlockIQ3_XXS {
  uint16_t d;
  uint8_t qs[3 * kQK_K / 8];
};
// Sub-block j: indices qs[8j + i] with bit 8 = bit i of qh[j] (kIQ3SGrid, 9 bits); sign bits
// signs[4j + l] (all 8 stored); scale s = nibble j % 2 of scales[j / 2]. w = (d · (1 + 2s)) ·
// grid · sign.
struct BlockIQ3_S {
  uint16_t d;
  uint8_t qs[kQK_K / 4];
  uint8_t qh[kQK_K / 32];
  uint8_t signs[kQK_K / 8];
  uint8_t scales[kQK_K / 64];
};
// Sub-block j: qh[j] holds the 3-bit scale s (bits 12..14), the sign of δ (bit 15) and bits 8..10
// of group l's 11-bit kIQ1SGrid index (bits 3l..3l+2; low 8 bits qs[4j + l]).
// w = (d · (2s + 1)) · (grid + δ), δ = ±0.125.
struct BlockIQ1_S {
  uint16_t d;
  uint8_t qs[kQK_K / 8];
  uint16_t qh[kQK_K / 32];
};
// Sub-block j: groups l = 0, 1 use qh[2j], 2, 3 qh[2j + 1]; of that byte, the low nibble (group
// 0 / 2) or high one (1 / 3) gives index bits 8..10 (nibble bits 0..2) and δ's sign (bit 3). The
// scales as 4 u16 sc[0..4): the 3-bit scale of groups 0-1 of sub-block j is bits 6(j % 2).. of
// sc[j / 2], of groups 2-3 the next 3 bits; the block's F16 d is the top nibbles of sc[0..3]
// (sc[i] >> 12 = bits 4i..4i+3 of d). w = (d · (2s + 1)) · (grid + δ).
struct BlockIQ1_M {
  uint8_t qs[kQK_K / 8];
  uint8_t qh[kQK_K / 16];
  uint8_t scales[kQK_K / 32];
};
// Ternary, 5 trits a byte in base 3 scaled to 0..255 (trit n of byte b: ((b · 3^n) mod 256 · 3)
// >> 8). Elements 0..159: trit n of qs[m] is element 32n + m (m < 32); 160..239: trit n of
// qs[32 + m] is 160 + 16n + m; 240..255: trit n of qh[m] is 240 + 4n + m (n < 4). w = (t − 1) · d.
struct BlockTQ1_0 {
  uint8_t qs[(kQK_K - 4 * kQK_K / 64) / 5];
  uint8_t qh[kQK_K / 64];
  uint16_t d;
};
// 2-bit codes as Q2_K's: element 128h + 32l + m is bits 2l of qs[32h + m]. w = (q − 1) · d.
struct BlockTQ2_0 {
  uint8_t qs[kQK_K / 4];
  uint16_t d;
};
// OCP microscaling FP4: E8M0 exponent e and 32 E2M1 codes laid out as Q4_0's nibbles.
// w = kMXFP4Values[code] · mxfp4_half_scale(e) (the doubled E2M1 value times 2^(e − 128)).
struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[kQK / 2];
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136);
static_assert(sizeof(BlockIQ2_XXS) == 66 && sizeof(BlockIQ2_XS) == 74 && sizeof(BlockIQ2_S) == 82);
static_assert(sizeof(BlockIQ3_XXS) == 98 && sizeof(BlockIQ3_S) == 110);
static_assert(sizeof(BlockIQ1_S) == 50 && sizeof(BlockIQ1_M) == 56);
static_assert(sizeof(BlockTQ1_0) == 54 && sizeof(BlockTQ2_0) == 66 && sizeof(BlockMXFP4) == 17);

// ggml's GGML_E8M0_TO_FP32_HALF: 2^(e − 128), i.e. half the E8M0 scale 2^(e − 127), as F32 bits
// (e = 0, 1 give the subnormals 2^−128, 2^−127; e = 255, E8M0's NaN, gives 2^127 as in ggml).
inline float mxfp4_half_scale(uint8_t e) {
  const uint32_t u = e < 2 ? uint32_t(0x00200000) << e : uint32_t(e - 1) << 23;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IQ1_M's F16 scale d, spread over the top nibbles of its scales as 4 u16 (BlockIQ1_M).
inline uint16_t iq1m_scale_bits(const uint8_t* block) {
  uint16_t sc[4];
  std::memcpy(sc, block + offsetof(BlockIQ1_M, scales), 8);
  return uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) |
                  (sc[3] & 0xf000));
}
// Writes h as IQ1_M's scale d, leaving the 3-bit sub-block scales as they are.
inline void iq1m_scale_set(uint8_t* block, uint16_t h) {
  uint16_t sc[4];
  std::memcpy(sc, block + offsetof(BlockIQ1_M, scales), 8);
  for (int i = 0; i < 4; ++i) sc[i] = uint16_t((sc[i] & 0x0fff) | (((h >> (4 * i)) & 0xf) << 12));
  std::memcpy(block + offsetof(BlockIQ1_M, scales), sc, 8);
}

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
// F32/F16/BF16, IQ1_M and MXFP4. Tests and benchmarks use it to plant chosen scales in random
// blocks.
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
    case DType::IQ2_XXS:
      return {offsetof(BlockIQ2_XXS, d)};
    case DType::IQ2_XS:
      return {offsetof(BlockIQ2_XS, d)};
    case DType::IQ2_S:
      return {offsetof(BlockIQ2_S, d)};
    case DType::IQ3_XXS:
      return {offsetof(BlockIQ3_XXS, d)};
    case DType::IQ3_S:
      return {offsetof(BlockIQ3_S, d)};
    case DType::IQ1_S:
      return {offsetof(BlockIQ1_S, d)};
    case DType::TQ1_0:
      return {offsetof(BlockTQ1_0, d)};
    case DType::TQ2_0:
      return {offsetof(BlockTQ2_0, d)};
    default:  // IQ1_M's d is split (iq1m_scale_bits), MXFP4's scale is an E8M0 byte
      return {};
  }
}

}  // namespace invar
