// Private to the quantised matmul (f32_act_simd.h): block decoders that turn one block of a
// quantised row, read in place from the file, into F32 weights in registers, 16 at a time, with the
// bits of the scalar dequant_row (quant/dequant.h).
//
// Why the bits agree: every type's weight is either an exact product of small integers and F16
// scales (Q8_0, Q4_0, Q5_0, Q3_K, Q6_K, IQ4_NL, IQ4_XS and the low-bit IQ1 / IQ2 / IQ3 / TQ types:
// at most 24 significant bits, so the F32 multiply is exact in any order; MXFP4: a small integer
// times a power of two, one rounding only where ggml's own product rounds), or such an exact
// product followed by one rounded addition or subtraction of an exact term (Q4_1, Q5_1: q·d + m;
// Q2_K, Q4_K, Q5_K: (d·sc)·q − dmin·m). The decoders compute the same exact products, then the same
// single rounded add/sub, lane by lane. The integer unpacking runs on 16 bytes in an SSE register
// (the same code for AVX2 and AVX-512); V::from_i8v widens the 16 signed bytes to F32.
//
// A decoder D has kBlock (elements), kBytes (bytes of a block), a constructor from the block's
// address that unpacks the block's scales, and chunk(c): weights [16c, 16c + 16) of the block.
// Byte offsets follow ggml's block structs (ggml-common.h); see quant/blocks.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/detmath_simd.h"  // <immintrin.h>, with GCC bug 105593 silenced
#include "quant/blocks.h"
#include "quant/dtype.h"
#include "quant/iq_grids.h"

namespace invar::qdecode {
namespace {

#define QDEC_INLINE inline __attribute__((always_inline))

QDEC_INLINE float f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);  // exact, subnormals included
}
QDEC_INLINE __m128i load16(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
QDEC_INLINE __m128i low_nibbles(__m128i v) {
  return _mm_and_si128(v, _mm_set1_epi8(0x0f));
}
QDEC_INLINE __m128i high_nibbles(__m128i v) {
  return _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0f));
}
// Byte i = 0x10 if bit i of the 16-bit `bits` is set, else 0 (the fifth bit of Q5_0 / Q5_1).
QDEC_INLINE __m128i bits_to_0x10(uint32_t bits) {
  const __m128i b = _mm_shuffle_epi8(_mm_cvtsi32_si128(int(bits)),
                                     _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
  const __m128i sel = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
  return _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(b, sel), sel), _mm_set1_epi8(0x10));
}
// Byte i = `value` where (v[i] & mask) == 0, else 0.
QDEC_INLINE __m128i where_clear(__m128i v, int mask, int value) {
  const __m128i clear =
      _mm_cmpeq_epi8(_mm_and_si128(v, _mm_set1_epi8(char(mask))), _mm_setzero_si128());
  return _mm_and_si128(clear, _mm_set1_epi8(char(value)));
}

// Decode streams the weights from DRAM once, a group of consecutive (so contiguous) rows at a time,
// `step_bytes` per step b. Each step prefetches as many bytes one group further on (at least
// kPrefetchMin bytes ahead), so the next group's rows arrive while this one computes; rows of
// one group are not prefetched from each other. Past the matrix's end a prefetch only touches
// memory and never faults.
inline constexpr int64_t kPrefetchMin = 8192;

QDEC_INLINE void prefetch_ahead(const uint8_t* group, int64_t group_bytes, int64_t step_bytes,
                                int64_t b) {
  const uint8_t* p = group + std::max(group_bytes, kPrefetchMin) + b * step_bytes;
  for (int64_t o = 0; o < step_bytes; o += 64) _mm_prefetch(p + o, _MM_HINT_T0);
}

// 16-float tables indexed by a 4-bit code: the code itself, the code − 8, IQ4's non-linear values.
alignas(64) inline constexpr float kCodes[16] = {0, 1, 2,  3,  4,  5,  6,  7,
                                                 8, 9, 10, 11, 12, 13, 14, 15};
alignas(64) inline constexpr float kCodesMinus8[16] = {-8, -7, -6, -5, -4, -3, -2, -1,
                                                       0,  1,  2,  3,  4,  5,  6,  7};
alignas(64) inline constexpr float kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                 1,    13,   25,  38,  53,  69,  89,  113};

// Bytes p[0..8) as int32 (signed or not) in F32, times `scale`: the exact products the scalar
// code forms one by one.
QDEC_INLINE void scaled_u8(__m128i p, float scale, float* out) {
  _mm256_storeu_ps(
      out, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(p)), _mm256_set1_ps(scale)));
}
QDEC_INLINE void scaled_i8(__m128i p, float scale, float* out) {
  _mm256_storeu_ps(
      out, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(p)), _mm256_set1_ps(scale)));
}

// Q4_K / Q5_K: the 8 six-bit scales and 8 mins packed in 12 bytes s[0..12) (s[12..16) are read
// and ignored): sub-block j < 4 has scale s[j] & 63, min s[j+4] & 63; j ≥ 4 has scale
// (s[j+4] & 15) | (s[j−4] >> 6) << 4, min (s[j+4] >> 4) | (s[j] >> 6) << 4. Out: d·scale,
// −dmin·min.
QDEC_INLINE void k4_scales(const uint8_t* s, float d, float dmin, float* d1, float* nm1) {
  const __m128i v = load16(s);
  // Lanes 0..7: scales of sub-blocks 0..7; lanes 8..15: their mins.
  const __m128i p =
      _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
  const __m128i q =
      _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7));
  const __m128i top = _mm_and_si128(_mm_srli_epi16(q, 2), _mm_set1_epi8(0x30));  // (q >> 6) << 4
  const __m128i low6 = _mm_and_si128(p, _mm_set1_epi8(63));
  const __m128i hi_scale = _mm_or_si128(low_nibbles(p), top);
  const __m128i hi_min = _mm_or_si128(high_nibbles(p), top);
  const __m128i mins = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1, -1);
  const __m128i packed = _mm_setr_epi8(0, 0, 0, 0, -1, -1, -1, -1, 0, 0, 0, 0, -1, -1, -1, -1);
  const __m128i r = _mm_blendv_epi8(low6, _mm_blendv_epi8(hi_scale, hi_min, mins), packed);
  scaled_u8(r, d, d1);
  scaled_u8(_mm_srli_si128(r, 8), -dmin, nm1);
}

template <class V>
struct Q8_0 {
  static constexpr int kBlock = 32, kBytes = 34;
  const uint8_t* q;
  float d;
  QDEC_INLINE explicit Q8_0(const uint8_t* b) : q(b + 2), d(f16(b)) {}
  QDEC_INLINE V chunk(int c) const { return V::mul(V::from_i8v(load16(q + 16 * c)), V::bcast(d)); }
};

template <class V>
struct Q4_0 {
  static constexpr int kBlock = 32, kBytes = 18;
  const uint8_t* q;
  float d;
  QDEC_INLINE explicit Q4_0(const uint8_t* b) : q(b + 2), d(f16(b)) {}
  // The 16 weights a code can stand for, d·(code − 8) (exact), then looked up.
  QDEC_INLINE V chunk(int c) const {
    return V::lut16(V::mul(V::load(kCodesMinus8), V::bcast(d)), q, 4 * c);
  }
};

template <class V>
struct Q4_1 {
  static constexpr int kBlock = 32, kBytes = 20;
  const uint8_t* q;
  float d, m;
  QDEC_INLINE explicit Q4_1(const uint8_t* b) : q(b + 4), d(f16(b)), m(f16(b + 2)) {}
  // code·d + m with the exact product: one FMA rounds exactly as the multiply-then-add does.
  QDEC_INLINE V chunk(int c) const {
    return V::lut16(V::fma(V::load(kCodes), V::bcast(d), V::bcast(m)), q, 4 * c);
  }
};

template <class V>
struct Q5_0 {
  static constexpr int kBlock = 32, kBytes = 22;
  const uint8_t* q;
  uint32_t qh;
  float d;
  QDEC_INLINE explicit Q5_0(const uint8_t* b) : q(b + 6), d(f16(b)) { std::memcpy(&qh, b + 2, 4); }
  QDEC_INLINE V chunk(int c) const {
    const __m128i v = load16(q);
    const __m128i n = _mm_or_si128(c == 0 ? low_nibbles(v) : high_nibbles(v),
                                   bits_to_0x10((qh >> (16 * c)) & 0xffff));
    return V::mul(V::from_i8v(_mm_sub_epi8(n, _mm_set1_epi8(16))), V::bcast(d));
  }
};

template <class V>
struct Q5_1 {
  static constexpr int kBlock = 32, kBytes = 24;
  const uint8_t* q;
  uint32_t qh;
  float d, m;
  QDEC_INLINE explicit Q5_1(const uint8_t* b) : q(b + 8), d(f16(b)), m(f16(b + 2)) {
    std::memcpy(&qh, b + 4, 4);
  }
  QDEC_INLINE V chunk(int c) const {
    const __m128i v = load16(q);
    const __m128i n = _mm_or_si128(c == 0 ? low_nibbles(v) : high_nibbles(v),
                                   bits_to_0x10((qh >> (16 * c)) & 0xffff));
    return V::fma(V::from_i8v(n), V::bcast(d), V::bcast(m));  // exact product: one rounding
  }
};

// Q2_K: chunk c has scale byte c (low nibble: scale, high: min) and the 2-bit field 2·((c/2)%4) of
// bytes qs[32·(c/8) + 16·(c%2) ..].
template <class V>
struct Q2_K {
  static constexpr int kBlock = 256, kBytes = 84;
  const uint8_t* qs;
  float dl[16], nml[16];  // scales and negated mins
  QDEC_INLINE explicit Q2_K(const uint8_t* b) : qs(b + 16) {
    const float d = f16(b + 80), dmin = f16(b + 82);
    const __m128i v = load16(b);
    scaled_u8(low_nibbles(v), d, dl);
    scaled_u8(_mm_srli_si128(low_nibbles(v), 8), d, dl + 8);
    scaled_u8(high_nibbles(v), -dmin, nml);
    scaled_u8(_mm_srli_si128(high_nibbles(v), 8), -dmin, nml + 8);
  }
  QDEC_INLINE V chunk(int c) const {
    const __m128i v = load16(qs + 32 * (c >> 3) + 16 * (c & 1));
    const __m128i q = _mm_and_si128(_mm_srli_epi16(v, 2 * ((c >> 1) & 3)), _mm_set1_epi8(3));
    // dl·q exact, so the FMA rounds dl·q − ml exactly as the multiply-then-subtract does.
    return V::fma(V::bcast(dl[c]), V::from_i8v(q), V::bcast(nml[c]));
  }
};

// Q3_K: like Q2_K's low 2 bits, minus 4 where bit (4·(c/8) + (c/2)%4) of hmask[16·(c%2) ..] is
// clear; 16 signed 6-bit scales packed in 12 bytes.
template <class V>
struct Q3_K {
  static constexpr int kBlock = 256, kBytes = 110;
  const uint8_t *hm, *qs;
  float dl[16];
  // Scale i: low 4 bits from s[i] (i < 8) or s[i − 8] >> 4, high 2 bits from
  // s[8 + i % 4] >> 2·(i / 4); minus 32; times d (exact). The 12 bytes s = b[96..108) are read as
  // bytes 2..14 of b[94..110) so the load stays inside the block.
  QDEC_INLINE explicit Q3_K(const uint8_t* b) : hm(b), qs(b + 32) {
    const __m128i v = load16(b + 94);
    const __m128i s = _mm_srli_si128(v, 2);
    const __m128i lo = _mm_unpacklo_epi64(low_nibbles(s), high_nibbles(s));
    // Byte i = s[8 + i % 4]; dword i / 4 shifted right by 2·(i / 4), bits 0..1 moved to 4..5.
    const __m128i h = _mm_shuffle_epi8(
        v, _mm_setr_epi8(10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13));
    const __m128i hi = _mm_and_si128(
        _mm_slli_epi16(_mm_srlv_epi32(h, _mm_setr_epi32(0, 2, 4, 6)), 4), _mm_set1_epi8(0x30));
    const __m128i q = _mm_sub_epi8(_mm_or_si128(lo, hi), _mm_set1_epi8(32));
    const float d = f16(b + 108);
    scaled_i8(q, d, dl);
    scaled_i8(_mm_srli_si128(q, 8), d, dl + 8);
  }
  QDEC_INLINE V chunk(int c) const {
    const int j = (c >> 1) & 3;
    const __m128i v = load16(qs + 32 * (c >> 3) + 16 * (c & 1));
    const __m128i low = _mm_and_si128(_mm_srli_epi16(v, 2 * j), _mm_set1_epi8(3));
    const __m128i q =
        _mm_sub_epi8(low, where_clear(load16(hm + 16 * (c & 1)), 1 << (4 * (c >> 3) + j), 4));
    return V::mul(V::bcast(dl[c]), V::from_i8v(q));
  }
};

// Q4_K: chunks 4j, 4j+1 are the low nibbles of qs[32j ..], 4j+2, 4j+3 the high ones; sub-block
// (32 weights) c/2.
template <class V>
struct Q4_K {
  static constexpr int kBlock = 256, kBytes = 144;
  const uint8_t* qs;
  float d1[8], nm1[8];  // scales and negated mins
  QDEC_INLINE explicit Q4_K(const uint8_t* b) : qs(b + 16) {
    k4_scales(b + 4, f16(b), f16(b + 2), d1, nm1);
  }
  // The sub-block's 16 possible weights d1·code − m1 (exact product, one rounding: the FMA
  // equals the multiply-then-subtract), then looked up by code.
  QDEC_INLINE V chunk(int c) const {
    const uint8_t* p = qs + 32 * (c >> 2) + 16 * (c & 1);
    if constexpr (requires { V::nibbles_fma(p, 0, 0.0f, 0.0f); }) {
      return V::nibbles_fma(p, (c & 2) ? 4 : 0, d1[c >> 1], nm1[c >> 1]);  // AVX2: the same FMA
    } else {
      const V table = V::fma(V::bcast(d1[c >> 1]), V::load(kCodes), V::bcast(nm1[c >> 1]));
      return V::lut16(table, p, (c & 2) ? 4 : 0);
    }
  }
};

// Q5_K: Q4_K's nibbles plus 16 where bit (c/2) of qh[16·(c%2) ..] is set.
template <class V>
struct Q5_K {
  static constexpr int kBlock = 256, kBytes = 176;
  const uint8_t *qh, *qs;
  float d1[8], nm1[8];  // scales and negated mins
  QDEC_INLINE explicit Q5_K(const uint8_t* b) : qh(b + 16), qs(b + 48) {
    k4_scales(b + 4, f16(b), f16(b + 2), d1, nm1);
  }
  QDEC_INLINE V chunk(int c) const {
    const __m128i v = load16(qs + 32 * (c >> 2) + 16 * (c & 1));
    const __m128i n = (c & 2) ? high_nibbles(v) : low_nibbles(v);
    const __m128i h = where_clear(load16(qh + 16 * (c & 1)), 1 << (c >> 1), 16);
    const __m128i q = _mm_add_epi8(n, _mm_xor_si128(h, _mm_set1_epi8(16)));
    return V::fma(V::bcast(d1[c >> 1]), V::from_i8v(q), V::bcast(nm1[c >> 1]));  // as Q4_K
  }
};

// Q6_K: in half h = c/8, group g = (c/2)%4, part p = c%2: low 4 bits from ql[64h + 32(g%2) + 16p
// ..] (high nibble for g ≥ 2), high 2 bits from qh[32h + 16p ..] >> 2g, minus 32; scale sc[8h + 2g
// + p].
template <class V>
struct Q6_K {
  static constexpr int kBlock = 256, kBytes = 210;
  const uint8_t *ql, *qh;
  float ds[16];
  QDEC_INLINE explicit Q6_K(const uint8_t* b) : ql(b), qh(b + 128) {
    const float d = f16(b + 208);
    const __m128i sc = load16(b + 192);
    scaled_i8(sc, d, ds);
    scaled_i8(_mm_srli_si128(sc, 8), d, ds + 8);
  }
  QDEC_INLINE V chunk(int c) const {
    const int h = c >> 3, g = (c >> 1) & 3, p = c & 1;
    const __m128i l = load16(ql + 64 * h + 32 * (g & 1) + 16 * p);
    const __m128i lo = g >= 2 ? high_nibbles(l) : low_nibbles(l);
    const __m128i hi =
        _mm_and_si128(_mm_srli_epi16(load16(qh + 32 * h + 16 * p), 2 * g), _mm_set1_epi8(3));
    const __m128i q = _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
    return V::mul(V::bcast(ds[8 * h + 2 * g + p]), V::from_i8v(q));
  }
};

template <class V>
struct IQ4_NL {
  static constexpr int kBlock = 32, kBytes = 18;
  const uint8_t* q;
  float d;
  QDEC_INLINE explicit IQ4_NL(const uint8_t* b) : q(b + 2), d(f16(b)) {}
  QDEC_INLINE V chunk(int c) const {
    return V::lut16(V::mul(V::bcast(d), V::load(kIq4nl)), q, 4 * c);
  }
};

// IQ4_XS: sub-block j = c/2 of 32 weights, scale (6 bits from scales_l / scales_h) − 32; chunk
// 2j the low nibbles of qs[16j ..], 2j+1 the high ones.
template <class V>
struct IQ4_XS {
  static constexpr int kBlock = 256, kBytes = 136;
  const uint8_t* qs;
  float dl[8];
  QDEC_INLINE explicit IQ4_XS(const uint8_t* b) : qs(b + 8) {
    // Sub-block j: low 4 bits = bits 4j.. of the u32 scales_l, high 2 bits = bits 2j.. of the
    // u16 scales_h; scale − 32.
    uint16_t sh;
    uint32_t sl;
    std::memcpy(&sh, b + 2, 2);
    std::memcpy(&sl, b + 4, 4);
    const __m256i lo =
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(int(sl)),
                                           _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                         _mm256_set1_epi32(15));
    const __m256i hi = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(sh), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
        _mm256_set1_epi32(3));
    const __m256i ls =
        _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
    _mm256_storeu_ps(dl, _mm256_mul_ps(_mm256_cvtepi32_ps(ls), _mm256_set1_ps(f16(b))));
  }
  QDEC_INLINE V chunk(int c) const {
    return V::lut16(V::mul(V::bcast(dl[c >> 1]), V::load(kIq4nl)), qs + 16 * (c >> 1), 4 * (c & 1));
  }
};

// ---- The low-bit types (layouts: quant/blocks.h; grids: quant/iq_grids.h). ----
//
// IQ2 / IQ3: a chunk is two groups of 8 whose unsigned magnitudes (≤ 62) come from grid entries,
// signs applied as bytes (−g fits an int8), times the group's scale db. The scalar code forms
// (db · g) · (±1); here db · (±g): both are the exact product, so the bits agree (no grid
// magnitude is 0, so even db = ±0 gives the same signed zero).

// Byte i = 0xff where bit i of the 16-bit `bits` is set, else 0.
QDEC_INLINE __m128i bits_to_mask(uint32_t bits) {
  const __m128i b = _mm_shuffle_epi8(_mm_cvtsi32_si128(int(bits)),
                                     _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
  const __m128i sel = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
  return _mm_cmpeq_epi8(_mm_and_si128(b, sel), sel);
}
// Byte i of q negated where bit i of `signs` is set.
QDEC_INLINE __m128i apply_signs(__m128i q, uint32_t signs) {
  const __m128i m = bits_to_mask(signs);
  return _mm_sub_epi8(_mm_xor_si128(q, m), m);
}
QDEC_INLINE uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
QDEC_INLINE uint32_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
// Two 8-byte grid entries as the 16 bytes of one chunk.
QDEC_INLINE __m128i grid_pair(uint64_t first, uint64_t second) {
  return _mm_set_epi64x(int64_t(second), int64_t(first));
}
// The 16 sign bits of IQ2_XXS / IQ3_XXS groups l and l + 1 from their 7-bit fields in `aux`.
QDEC_INLINE uint32_t signs7_pair(uint32_t aux, int l) {
  return uint32_t(kIQ2SignsTable[(aux >> (7 * l)) & 127]) |
         uint32_t(kIQ2SignsTable[(aux >> (7 * (l + 1))) & 127]) << 8;
}

// IQ2_XXS: sub-block j = c/2 is the u32 pair at qs[8j]; chunk c its groups 2(c%2), 2(c%2) + 1.
template <class V>
struct IQ2_XXS {
  static constexpr int kBlock = 256, kBytes = 66;
  const uint8_t* qs;
  float db[8];
  QDEC_INLINE explicit IQ2_XXS(const uint8_t* b) : qs(b + 2) {
    const float d = f16(b);
    for (int j = 0; j < 8; ++j) db[j] = d * (0.5f + float(load_u32(qs + 8 * j + 4) >> 28)) * 0.25f;
  }
  QDEC_INLINE V chunk(int c) const {
    const uint8_t* g = qs + 8 * (c >> 1);
    const int l = 2 * (c & 1);
    const __m128i q = grid_pair(kIQ2XXSGrid[g[l]], kIQ2XXSGrid[g[l + 1]]);
    return V::mul(V::bcast(db[c >> 1]),
                  V::from_i8v(apply_signs(q, signs7_pair(load_u32(g + 4), l))));
  }
};

// IQ2_XS: u16 codes qs[2c], qs[2c + 1] (9-bit index, 7 sign bits); one scale per chunk.
template <class V>
struct IQ2_XS {
  static constexpr int kBlock = 256, kBytes = 74;
  const uint8_t* qs;
  float db[16];
  QDEC_INLINE explicit IQ2_XS(const uint8_t* b) : qs(b + 2) {
    const float d = f16(b);
    for (int j = 0; j < 8; ++j) {
      db[2 * j] = d * (0.5f + float(b[66 + j] & 0xf)) * 0.25f;
      db[2 * j + 1] = d * (0.5f + float(b[66 + j] >> 4)) * 0.25f;
    }
  }
  QDEC_INLINE V chunk(int c) const {
    const uint32_t u0 = load_u16(qs + 4 * c), u1 = load_u16(qs + 4 * c + 2);
    const __m128i q = grid_pair(kIQ2XSGrid[u0 & 511], kIQ2XSGrid[u1 & 511]);
    const uint32_t signs = uint32_t(kIQ2SignsTable[u0 >> 9]) | uint32_t(kIQ2SignsTable[u1 >> 9])
                                                                   << 8;
    return V::mul(V::bcast(db[c]), V::from_i8v(apply_signs(q, signs)));
  }
};

// IQ2_S: indices qs[2c], qs[2c + 1] with bits 8..9 from qh[c/2]; sign bytes qs[32 + 2c ..].
template <class V>
struct IQ2_S {
  static constexpr int kBlock = 256, kBytes = 82;
  const uint8_t *qs, *qh;
  float db[16];
  QDEC_INLINE explicit IQ2_S(const uint8_t* b) : qs(b + 2), qh(b + 66) {
    const float d = f16(b);
    for (int j = 0; j < 8; ++j) {
      db[2 * j] = d * (0.5f + float(b[74 + j] & 0xf)) * 0.25f;
      db[2 * j + 1] = d * (0.5f + float(b[74 + j] >> 4)) * 0.25f;
    }
  }
  QDEC_INLINE V chunk(int c) const {
    const int h = qh[c >> 1], l = 2 * (c & 1);
    const int i0 = qs[2 * c] | ((h << (8 - 2 * l)) & 0x300);
    const int i1 = qs[2 * c + 1] | ((h << (6 - 2 * l)) & 0x300);
    const __m128i q = grid_pair(kIQ2SGrid[i0], kIQ2SGrid[i1]);
    return V::mul(V::bcast(db[c]), V::from_i8v(apply_signs(q, load_u16(qs + 32 + 2 * c))));
  }
};

// IQ3_XXS: chunk c is the 4-byte grid entries of indices qs[4c .. 4c + 4); sub-block c/2's u32
// at qs[64 + 4(c/2)] holds its scale and sign fields.
template <class V>
struct IQ3_XXS {
  static constexpr int kBlock = 256, kBytes = 98;
  const uint8_t* qs;
  float db[8];
  QDEC_INLINE explicit IQ3_XXS(const uint8_t* b) : qs(b + 2) {
    const float d = f16(b);
    for (int j = 0; j < 8; ++j) db[j] = d * (0.5f + float(load_u32(qs + 64 + 4 * j) >> 28)) * 0.5f;
  }
  QDEC_INLINE V chunk(int c) const {
    const uint8_t* g = qs + 4 * c;
    const __m128i q = _mm_setr_epi32(int(kIQ3XXSGrid[g[0]]), int(kIQ3XXSGrid[g[1]]),
                                     int(kIQ3XXSGrid[g[2]]), int(kIQ3XXSGrid[g[3]]));
    const uint32_t signs = signs7_pair(load_u32(qs + 64 + 4 * (c >> 1)), 2 * (c & 1));
    return V::mul(V::bcast(db[c >> 1]), V::from_i8v(apply_signs(q, signs)));
  }
};

// IQ3_S: indices qs[4c + t] with bit 8 = bit 4(c%2) + t of qh[c/2]; sign bytes signs[2c ..].
template <class V>
struct IQ3_S {
  static constexpr int kBlock = 256, kBytes = 110;
  const uint8_t *qs, *qh, *signs;
  float db[8];
  QDEC_INLINE explicit IQ3_S(const uint8_t* b) : qs(b + 2), qh(b + 66), signs(b + 74) {
    const float d = f16(b);
    for (int j = 0; j < 8; ++j)
      db[j] = d * float(1 + 2 * ((b[106 + j / 2] >> (4 * (j % 2))) & 0xf));
  }
  QDEC_INLINE V chunk(int c) const {
    const uint8_t* g = qs + 4 * c;
    const int h = qh[c >> 1] >> (4 * (c & 1));
    const __m128i q = _mm_setr_epi32(
        int(kIQ3SGrid[g[0] | ((h << 8) & 256)]), int(kIQ3SGrid[g[1] | ((h << 7) & 256)]),
        int(kIQ3SGrid[g[2] | ((h << 6) & 256)]), int(kIQ3SGrid[g[3] | ((h << 5) & 256)]));
    return V::mul(V::bcast(db[c >> 1]), V::from_i8v(apply_signs(q, load_u16(signs + 2 * c))));
  }
};

// IQ1_S / IQ1_M: the scalar w = dl · (g + δ), g ∈ {−1, 0, 1}, δ = ±1/8, is the exact product (dl
// has at most 15 significant bits, 8(g + δ) ∈ {±1, ±7, ±9}), and so is (dl / 8) · (8g ± 1) with
// dl / 8 exact (dl ≥ 2^−24 or 0): the chunk is the bytes 8g ± 1, one sign of δ per group of 8.
QDEC_INLINE __m128i iq1_codes(uint64_t g0, uint64_t g1, bool neg0, bool neg1) {
  constexpr int64_t kOnes = 0x0101010101010101ll, kMinusOnes = -1;  // bytes +1 / −1
  const __m128i delta = _mm_set_epi64x(neg1 ? kMinusOnes : kOnes, neg0 ? kMinusOnes : kOnes);
  return _mm_add_epi8(_mm_sign_epi8(_mm_set1_epi8(8), grid_pair(g0, g1)), delta);
}

// IQ1_S: sub-block j = c/2 has qh[j] (scale, δ's sign, index bits 8..10 of its 4 groups).
template <class V>
struct IQ1_S {
  static constexpr int kBlock = 256, kBytes = 50;
  const uint8_t *qs, *qh;
  float dl8[8];  // dl / 8
  QDEC_INLINE explicit IQ1_S(const uint8_t* b) : qs(b + 2), qh(b + 34) {
    const float d = f16(b);
    for (int j = 0; j < 8; ++j) {
      const float dl = d * float(2 * ((load_u16(qh + 2 * j) >> 12) & 7) + 1);
      dl8[j] = dl * 0.125f;
    }
  }
  QDEC_INLINE V chunk(int c) const {
    const uint32_t h = load_u16(qh + 2 * (c >> 1));
    const int l = 2 * (c & 1);
    const uint64_t g0 = kIQ1SGrid[qs[2 * c] | (((h >> (3 * l)) & 7) << 8)];
    const uint64_t g1 = kIQ1SGrid[qs[2 * c + 1] | (((h >> (3 * l + 3)) & 7) << 8)];
    const bool neg = (h & 0x8000) != 0;
    return V::mul(V::bcast(dl8[c >> 1]), V::from_i8v(iq1_codes(g0, g1, neg, neg)));
  }
};

// IQ1_M: chunk c's two groups take index bits 8..10 and δ's sign from the low and high nibbles
// of qh[c]; scale 16ths: 3 bits per chunk in the u16 scales, F16 d in their top nibbles.
template <class V>
struct IQ1_M {
  static constexpr int kBlock = 256, kBytes = 56;
  const uint8_t *qs, *qh;
  float dl8[16];  // dl / 8 per chunk
  QDEC_INLINE explicit IQ1_M(const uint8_t* b) : qs(b), qh(b + 32) {
    const float d = _cvtsh_ss(iq1m_scale_bits(b));
    for (int c = 0; c < 16; ++c) {
      const int j = c >> 1, shift = 6 * (j % 2) + 3 * (c & 1);
      const float dl = d * float(2 * ((load_u16(b + 48 + 2 * (j / 2)) >> shift) & 7) + 1);
      dl8[c] = dl * 0.125f;
    }
  }
  QDEC_INLINE V chunk(int c) const {
    const int h = qh[c];
    const uint64_t g0 = kIQ1SGrid[qs[2 * c] | ((h & 7) << 8)];
    const uint64_t g1 = kIQ1SGrid[qs[2 * c + 1] | (((h >> 4) & 7) << 8)];
    return V::mul(V::bcast(dl8[c]), V::from_i8v(iq1_codes(g0, g1, h & 8, h & 0x80)));
  }
};

// TQ1_0: chunk c < 10 is trit c/2 of qs[16(c%2) ..], 10 ≤ c < 15 trit c − 10 of qs[32 ..], chunk 15
// trits 0..3 of qh[0..4) (4 lanes each). Trit of byte b times 3^n: ((b · 3^n mod 256) · 3) >> 8,
// in 16-bit lanes; w = (t − 1) · d.
template <class V>
struct TQ1_0 {
  static constexpr int kBlock = 256, kBytes = 54;
  const uint8_t* q;
  float d;
  QDEC_INLINE explicit TQ1_0(const uint8_t* b) : q(b), d(f16(b + 52)) {}
  QDEC_INLINE V chunk(int c) const {
    static constexpr int16_t kPow3[5] = {1, 3, 9, 27, 81};
    __m128i bytes;
    __m256i pow3;
    if (c < 10) {
      bytes = load16(q + 16 * (c & 1));
      pow3 = _mm256_set1_epi16(kPow3[c >> 1]);
    } else if (c < 15) {
      bytes = load16(q + 32);
      pow3 = _mm256_set1_epi16(kPow3[c - 10]);
    } else {
      bytes = _mm_set1_epi32(int(load_u32(q + 48)));
      pow3 = _mm256_setr_epi16(1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27);
    }
    const __m256i x = _mm256_and_si256(_mm256_mullo_epi16(_mm256_cvtepu8_epi16(bytes), pow3),
                                       _mm256_set1_epi16(0xff));
    const __m256i t = _mm256_srli_epi16(_mm256_mullo_epi16(x, _mm256_set1_epi16(3)), 8);
    const __m128i t8 = _mm_packus_epi16(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
    return V::mul(V::from_i8v(_mm_sub_epi8(t8, _mm_set1_epi8(1))), V::bcast(d));
  }
};

// TQ2_0: chunk c is the 2-bit field 2·((c/2)%4) of qs[32·(c/8) + 16·(c%2) ..] (as Q2_K); w = (q −
// 1) · d.
template <class V>
struct TQ2_0 {
  static constexpr int kBlock = 256, kBytes = 66;
  const uint8_t* qs;
  float d;
  QDEC_INLINE explicit TQ2_0(const uint8_t* b) : qs(b), d(f16(b + 64)) {}
  QDEC_INLINE V chunk(int c) const {
    const __m128i v = load16(qs + 32 * (c >> 3) + 16 * (c & 1));
    const __m128i q = _mm_and_si128(_mm_srli_epi16(v, 2 * ((c >> 1) & 3)), _mm_set1_epi8(3));
    return V::mul(V::from_i8v(_mm_sub_epi8(q, _mm_set1_epi8(1))), V::bcast(d));
  }
};

// MXFP4's doubled E2M1 values as floats (kMXFP4Values).
alignas(64) inline constexpr float kMxfp4[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                                 0, -1, -2, -3, -4, -6, -8, -12};

// MXFP4: the 16 weights a code can stand for, value · 2^(e − 128) (the scalar code's products),
// looked up as IQ4_NL's.
template <class V>
struct MXFP4 {
  static constexpr int kBlock = 32, kBytes = 17;
  const uint8_t* q;
  float d;
  QDEC_INLINE explicit MXFP4(const uint8_t* b) : q(b + 1), d(mxfp4_half_scale(b[0])) {}
  QDEC_INLINE V chunk(int c) const {
    return V::lut16(V::mul(V::load(kMxfp4), V::bcast(d)), q, 4 * c);
  }
};

#undef QDEC_INLINE

}  // namespace
}  // namespace invar::qdecode
