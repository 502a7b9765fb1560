// Private to the quantised matmul (f32_act_simd.h): AVX-512 few-rows (decode) kernels for the
// types of Q8_0, Q4_K_M and Q5_K_M files (Q8_0, Q4_K, Q5_K, Q6_K), with the bits of the generic
// path (f32_act_unpack.h).
//
// At M = 1 each weight feeds one FMA, so the cost per 16 weights is what it takes to unpack them.
// The generic unpackers take one block of one row at a time in 16-byte registers; here:
//   - Q4_K / Q5_K: the 12-byte scale fields of 4 rows sit in the 4 lanes of one register and are
//     unpacked together (k4_scales4);
//   - Q5_K: the 5-bit code indexes a 32-entry table (two registers, vpermt2ps);
//   - Q6_K: half a block (128 weights: 64 bytes of low nibbles, 32 of high bits) is unpacked at
//     once in 512-bit registers into 8 × 16 signed codes, instead of 16 bytes per chunk;
//   - Q8_0: the F16 scales of a row's 8 blocks are packed by integer instructions and converted
//     in one instruction;
//   - 4 rows side by side: at M = 1 their 4 FMA chains still cover the FMA latency, since each
//     FMA waits on 2-4 cycles of unpacking, and 4 interleaved row streams per thread leave the
//     hardware prefetchers working from DRAM, where 8 defeat them (docs/machine.md has the
//     measurements behind each of these choices).
// Every loop over rows and lanes is unrolled so the R·P accumulators stay in registers (an
// accumulator array indexed by a loop counter lives in memory).
// The weights are the same exact F32 values (same products, same single rounded add for Q4_K and
// Q5_K), fed to the same per-lane FMA chains in the same k order: nothing in the canonical order
// changes.
//
// Templates over V (vec_avx512.h) so that the AVX2 translation unit, which includes this header
// through f32_act_simd.h, never instantiates them.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/detmath_simd.h"  // <immintrin.h>, with GCC bug 105593 silenced
#include "kernels/matmul/f32_act.h"
#include "kernels/matmul/f32_act_unpack.h"

// GCC 12's false positive on the AVX-512 intrinsics' undefined pass-through operands (as in
// vec_avx512.h, which the AVX-512 file includes after this header).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace invar::qdirect512 {
namespace {

#define QD_INLINE inline __attribute__((always_inline))

// Not an int32_t array filled by memcpy: that goes through the stack, and store forwarding into
// the vector costs 20% of the Q4_K kernel's time.
QD_INLINE int32_t i32_at(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

template <class V>
QD_INLINE __m512 bcast(const float* p) {
  return _mm512_set1_ps(*p);
}

// Q4_K scales of 4 blocks (b[i]: block start): out[i][0..8) = d·scale_j, out[i][8..16) =
// −dmin·min_j, as qdecode::k4_scales computes them one block at a time. Each block's bytes 4..20
// (12 scale bytes, 4 ignored) fill one 128-bit lane; every byte operation below stays in its lane.
template <class V>
QD_INLINE void k4_scales4(const uint8_t* const* b, float (*out)[16]) {
  __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[0] + 4)));
  v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[1] + 4)), 1);
  v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[2] + 4)), 2);
  v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[3] + 4)), 3);
  // Per lane, bytes 0..7: scales of sub-blocks 0..7; bytes 8..15: their mins (see k4_scales).
  const __m512i p = _mm512_shuffle_epi8(
      v, _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11)));
  const __m512i q = _mm512_shuffle_epi8(
      v, _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7)));
  const __m512i lo4 = _mm512_set1_epi8(0x0f);
  const __m512i top = _mm512_and_si512(_mm512_srli_epi16(q, 2), _mm512_set1_epi8(0x30));
  const __m512i low6 = _mm512_and_si512(p, _mm512_set1_epi8(63));
  // 0xEA: (a & b) | c
  const __m512i hi_scale = _mm512_ternarylogic_epi32(p, lo4, top, 0xEA);
  const __m512i hi_min = _mm512_ternarylogic_epi32(_mm512_srli_epi16(p, 4), lo4, top, 0xEA);
  const __m512i r = _mm512_mask_blend_epi8(
      0xF0F0F0F0F0F0F0F0ull, low6, _mm512_mask_blend_epi8(0xF000F000F000F000ull, hi_scale, hi_min));
  // d and dmin (the blocks' first 4 bytes), dmin negated (exact): d0, −dmin0, d1, −dmin1, …
  const __m512 ds = _mm512_castps256_ps512(_mm256_cvtph_ps(
      _mm_xor_si128(_mm_setr_epi32(i32_at(b[0]), i32_at(b[1]), i32_at(b[2]), i32_at(b[3])),
                    _mm_set1_epi32(int32_t(0x80000000u)))));
  const __m128i lanes[4] = {_mm512_castsi512_si128(r), _mm512_extracti32x4_epi32(r, 1),
                            _mm512_extracti32x4_epi32(r, 2), _mm512_extracti32x4_epi32(r, 3)};
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    // Lanes 0..7 × d_i, lanes 8..15 × −dmin_i: the exact products of k4_scales.
    const __m512i sel =
        _mm512_add_epi32(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                         _mm512_set1_epi32(2 * i));
    _mm512_storeu_ps(out[i], _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(lanes[i])),
                                           _mm512_permutexvar_ps(sel, ds)));
  }
}

// The activations of 64 weights (4 vectors) for R rows. At M = 1 they stay in registers across
// the P weight rows; with more rows they would crowd out the R·P accumulators, so each FMA reads
// its activation from memory (a load operand, and loads are not the bottleneck).
template <class V, int R>
struct X4 {
  const float* x;
  int64_t ld;
  QD_INLINE X4(const float* x_, int64_t ld_) : x(x_), ld(ld_) {}
  QD_INLINE __m512 at(int r, int c) const { return _mm512_loadu_ps(x + r * ld + 16 * c); }
};
template <class V>
struct X4<V, 1> {
  __m512 v[4];
  QD_INLINE X4(const float* x, int64_t) {
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) v[c] = _mm512_loadu_ps(x + 16 * c);
  }
  QD_INLINE __m512 at(int, int c) const {
    return v[c];
  }
};

// Q4_K, R activation rows × P weight rows from row n0 (P a multiple of 4). Sub-block s (32
// weights) has the table d1·code − m1 of its 16 possible weights (as qdecode::Q4_K::chunk); the
// 16 bytes qs[32j + 16h ..] hold chunk 4j + h (low nibbles) and 4j + 2 + h (high nibbles).
template <class V, int R, int P>
void q4k_rows(const QuantView& w, int64_t n0, const float* x, float* y) {
  static_assert(P % 4 == 0);
  constexpr int kBytes = 144;
  const __m512 codes = _mm512_load_ps(qdecode::kCodes);
  const uint8_t* row[P];
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p) row[p] = w.data + (n0 + p) * w.row_bytes;
  __m512 acc[R][P];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  // Block b's scales are unpacked during block b − 1: the broadcasts that read them then find
  // them in the cache, not in flight in the store queue (a 64-byte store does not forward to
  // a 4-byte load: the block's first lookups waited for the stores to retire).
  alignas(64) float sc_buf[2][P][16];
  const int64_t n_blocks = w.k / 256;
  auto scales = [&](int64_t b) __attribute__((always_inline)) {
    const uint8_t* blk[P];
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) blk[p] = row[p] + b * kBytes;
#pragma GCC unroll 8
    for (int p = 0; p < P; p += 4) k4_scales4<V>(blk + p, sc_buf[b & 1] + p);
  };
  scales(0);
  for (int64_t b = 0; b < n_blocks; ++b) {
    qdecode::prefetch_ahead(row[0], P * w.row_bytes, P * kBytes, b);
    if (b + 1 < n_blocks) scales(b + 1);
    const uint8_t* blk[P];
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) blk[p] = row[p] + b * kBytes;
    // The scales go through memory: broadcasts from memory are loads, while the register
    // shuffles the compiler would otherwise pick compete with the lookups for the shuffle units.
    asm volatile("" ::: "memory");
    float(*sc)[16] = sc_buf[b & 1];
    const float* xb = x + b * 256;
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const X4<V, R> xv(xb + 64 * j, w.k);
#pragma GCC unroll 2
      for (int p0 = 0; p0 < P; p0 += 4) {
        __m512i idx[4][2];
        __m512 tb[4][2];
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
          const uint8_t* qs = blk[p0 + q] + 16 + 32 * j;
          idx[q][0] = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
          idx[q][1] =
              _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16)));
          tb[q][0] = _mm512_fmadd_ps(bcast<V>(&sc[p0 + q][2 * j]), codes,
                                     bcast<V>(&sc[p0 + q][8 + 2 * j]));
          tb[q][1] = _mm512_fmadd_ps(bcast<V>(&sc[p0 + q][2 * j + 1]), codes,
                                     bcast<V>(&sc[p0 + q][9 + 2 * j]));
        }
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
#pragma GCC unroll 4
          for (int q = 0; q < 4; ++q) {
            const __m512 wv = _mm512_permutexvar_ps(
                c < 2 ? idx[q][c] : _mm512_srli_epi32(idx[q][c - 2], 4), tb[q][c / 2]);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r)
              acc[r][p0 + q] = _mm512_fmadd_ps(wv, xv.at(r, c), acc[r][p0 + q]);
          }
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) y[r * w.n + n0 + p] = V::sum(V{acc[r][p]});
}

// Q6_K, R activation rows × P weight rows from row n0. Half h of a block (weights 128h ..) takes
// its low nibbles from ql[64h .. 64h + 64) — in 128-bit lane L: chunk 8h + L (low nibbles) and
// 8h + 4 + L (high nibbles) — and its 2 high bits from qh[32h .. 32h + 32), byte i of part
// p = L % 2 shifted by 2·g for group g = chunk's (c / 2) % 4 (see qdecode::Q6_K).
template <class V, int R, int P>
void q6k_rows(const QuantView& w, int64_t n0, const float* x, float* y) {
  constexpr int kBytes = 210;
  const uint8_t* row[P];
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p) row[p] = w.data + (n0 + p) * w.row_bytes;
  __m512 acc[R][P];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  // Block b's scales and codes are unpacked during block b − 1 (two buffers): the loads that
  // read them then find them in the cache, not in flight in the store queue (a 64-byte store
  // does not forward to the 16-byte and 4-byte loads that read it back, so they would wait for
  // the stores to retire).
  alignas(64) float ds_buf[2][P][16];
  alignas(64) int8_t codes_buf[2][P][256];  // 16 chunks of 16 codes − 32
  // qh broadcast to lanes (part 0, part 1, part 0, part 1); the low-nibble lanes hold groups
  // 0, 0, 1, 1 (high bits at shift 0, 2: moved up to bits 4..5 by << 4, << 2) and the
  // high-nibble lanes groups 2, 2, 3, 3 (shift 4, 6: >> 0, >> 2).
  const __m512i shift_lo = _mm512_setr_epi64(4, 4, 4, 4, 2, 2, 2, 2);
  const __m512i shift_hi = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2);
  const __m512i lo4 = _mm512_set1_epi8(0x0f), bits45 = _mm512_set1_epi8(0x30);
  const __m512i k32 = _mm512_set1_epi8(32);
  auto unpack = [&](int64_t b) __attribute__((always_inline)) {
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
      const uint8_t* blk = row[p] + b * kBytes;
      // ds = d · scale (int8): exact.
      const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192));
      _mm512_store_ps(ds_buf[b & 1][p], _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(s)),
                                                      _mm512_set1_ps(qdecode::f16(blk + 208))));
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m512i ql = _mm512_loadu_si512(blk + 64 * h);
        const __m512i qh = _mm512_broadcast_i64x4(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * h)));
        // 0xF8: a | (b & c): nibble | high bits in bits 4..5
        const __m512i lo = _mm512_ternarylogic_epi32(_mm512_and_si512(ql, lo4),
                                                     _mm512_sllv_epi64(qh, shift_lo), bits45, 0xF8);
        const __m512i hi =
            _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(ql, 4), lo4),
                                      _mm512_srlv_epi64(qh, shift_hi), bits45, 0xF8);
        _mm512_store_si512(codes_buf[b & 1][p] + 128 * h, _mm512_sub_epi8(lo, k32));
        _mm512_store_si512(codes_buf[b & 1][p] + 128 * h + 64, _mm512_sub_epi8(hi, k32));
      }
    }
  };
  const int64_t n_blocks = w.k / 256;
  unpack(0);
  for (int64_t b = 0; b < n_blocks; ++b) {
    qdecode::prefetch_ahead(row[0], P * w.row_bytes, P * kBytes, b);
    if (b + 1 < n_blocks) unpack(b + 1);
    asm volatile("" ::: "memory");  // codes and scales are read back from memory
    const float(*ds)[16] = ds_buf[b & 1];
    const int8_t(*codes)[256] = codes_buf[b & 1];
    const float* xb = x + b * 256;
#pragma GCC unroll 16
    for (int c = 0; c < 16; ++c) {
      __m512 xv[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) xv[r] = _mm512_loadu_ps(xb + r * w.k + 16 * c);
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) {
        const __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
            _mm_load_si128(reinterpret_cast<const __m128i*>(codes[p] + 16 * c))));
        const __m512 wv = _mm512_mul_ps(bcast<V>(&ds[p][c]), q);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[r][p] = _mm512_fmadd_ps(wv, xv[r], acc[r][p]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) y[r * w.n + n0 + p] = V::sum(V{acc[r][p]});
}

// Q5_K's codes 16..31 (the upper half of its 32-entry tables).
alignas(64) inline constexpr float kCodes16[16] = {16, 17, 18, 19, 20, 21, 22, 23,
                                                   24, 25, 26, 27, 28, 29, 30, 31};

// Bit s of each dword of h moved to bit 4 (other bits: don't care, see q5k_rows).
template <class V>
QD_INLINE __m512i bit_to_4(__m512i h, int s) {
  return s <= 4 ? _mm512_slli_epi32(h, 4 - s) : _mm512_srli_epi32(h, s - 4);
}

// Q5_K, R activation rows × P weight rows from row n0 (P a multiple of 4): Q4_K's nibbles and
// scales, plus the fifth bit (c / 2) of qh[16·(c % 2) ..] for chunk c. Sub-block s has a
// 32-entry table d1·code − m1 (code 0..31, each entry the FMA qdecode::Q5_K::chunk computes) in
// two registers; the code (nibble | fifth bit << 4) indexes it with vpermt2ps, which reads bits
// 0..4 of each index only, so one bit-select (0xE4: c ? a : b) builds the index.
template <class V, int R, int P>
void q5k_rows(const QuantView& w, int64_t n0, const float* x, float* y) {
  static_assert(P % 4 == 0);
  constexpr int kBytes = 176;
  const __m512 codes = _mm512_load_ps(qdecode::kCodes), codes16 = _mm512_load_ps(kCodes16);
  const __m512i lo4 = _mm512_set1_epi32(0x0f);
  const uint8_t* row[P];
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p) row[p] = w.data + (n0 + p) * w.row_bytes;
  __m512 acc[R][P];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  alignas(64) float sc[P][16];
  const int64_t n_blocks = w.k / 256;
  for (int64_t b = 0; b < n_blocks; ++b) {
    qdecode::prefetch_ahead(row[0], P * w.row_bytes, P * kBytes, b);
    const uint8_t* blk[P];
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) blk[p] = row[p] + b * kBytes;
#pragma GCC unroll 8
    for (int p = 0; p < P; p += 4) k4_scales4<V>(blk + p, sc + p);
    asm volatile("" ::: "memory");
    const float* xb = x + b * 256;
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const X4<V, R> xv(xb + 64 * j, w.k);
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) {
        const uint8_t* qs = blk[p] + 48 + 32 * j;
        const uint8_t* qh = blk[p] + 16;
        const __m512i i0 =
            _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
        const __m512i i1 =
            _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16)));
        const __m512i h0 =
            _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qh)));
        const __m512i h1 =
            _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qh + 16)));
        const __m512 d0 = bcast<V>(&sc[p][2 * j]), m0 = bcast<V>(&sc[p][8 + 2 * j]);
        const __m512 d1 = bcast<V>(&sc[p][2 * j + 1]), m1 = bcast<V>(&sc[p][9 + 2 * j]);
        const __m512 t0l = _mm512_fmadd_ps(d0, codes, m0), t0h = _mm512_fmadd_ps(d0, codes16, m0);
        const __m512 t1l = _mm512_fmadd_ps(d1, codes, m1), t1h = _mm512_fmadd_ps(d1, codes16, m1);
        const __m512 wv[4] = {
            _mm512_permutex2var_ps(
                t0l, _mm512_ternarylogic_epi32(i0, bit_to_4<V>(h0, 2 * j), lo4, 0xE4), t0h),
            _mm512_permutex2var_ps(
                t0l, _mm512_ternarylogic_epi32(i1, bit_to_4<V>(h1, 2 * j), lo4, 0xE4), t0h),
            _mm512_permutex2var_ps(t1l,
                                   _mm512_ternarylogic_epi32(_mm512_srli_epi32(i0, 4),
                                                             bit_to_4<V>(h0, 2 * j + 1), lo4, 0xE4),
                                   t1h),
            _mm512_permutex2var_ps(t1l,
                                   _mm512_ternarylogic_epi32(_mm512_srli_epi32(i1, 4),
                                                             bit_to_4<V>(h1, 2 * j + 1), lo4, 0xE4),
                                   t1h)};
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c)
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) acc[r][p] = _mm512_fmadd_ps(wv[c], xv.at(r, c), acc[r][p]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) y[r * w.n + n0 + p] = V::sum(V{acc[r][p]});
}

// Q8_0: G blocks (32 weights each) of each of P rows (row p at blk + p·rb) against R activation
// rows; ds[p][g] holds block g's scale d as F32. Each weight vector is the exact product q·d of
// qdecode::Q8_0, with d broadcast from memory (a load, not a shuffle).
template <int R, int P, int G>
QD_INLINE void q80_blocks(const uint8_t* blk, int64_t rb, const float (*ds)[8], const float* xb,
                          int64_t ldx, __m512 (&acc)[R][P]) {
#pragma GCC unroll 8
  for (int g = 0; g < G; ++g) {
#pragma GCC unroll 2
    for (int c = 0; c < 2; ++c) {
      __m512 xv[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) xv[r] = _mm512_loadu_ps(xb + r * ldx + 32 * g + 16 * c);
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) {
        const __m128i q =
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + p * rb + 34 * g + 2 + 16 * c));
        const __m512 wv =
            _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), _mm512_set1_ps(ds[p][g]));
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc[r][p] = _mm512_fmadd_ps(wv, xv[r], acc[r][p]);
      }
    }
  }
}

// The F16 words at p, p + 34, p + 68, p + 102 (4 Q8_0 scales), packed by the integer units.
QD_INLINE uint64_t q80_scales4(const uint8_t* p) {
  uint16_t h[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) std::memcpy(&h[i], p + 34 * i, 2);
  return uint64_t(h[0]) | uint64_t(h[1]) << 16 | uint64_t(h[2]) << 32 | uint64_t(h[3]) << 48;
}

// Q8_0, R activation rows × P weight rows from row n0, 8 blocks of each row a step. The F16
// scales of a row's 8 blocks are packed in integer registers and converted together, instead of
// an insert, a conversion and a broadcast per block.
template <class V, int R, int P>
void q80_rows(const QuantView& w, int64_t n0, const float* x, float* y) {
  constexpr int kBytes = 34, G = 8;
  const int64_t rb = w.row_bytes;
  const uint8_t* rows = w.data + n0 * rb;
  __m512 acc[R][P];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  alignas(64) float ds[P][8];
  const int64_t n_blocks = w.k / 32;
  int64_t b = 0;
  for (; b + G <= n_blocks; b += G) {
    qdecode::prefetch_ahead(rows, P * rb, P * G * kBytes, b / G);
    const uint8_t* blk = rows + b * kBytes;
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
      const __m128i h = _mm_set_epi64x(int64_t(q80_scales4(blk + p * rb + 4 * kBytes)),
                                       int64_t(q80_scales4(blk + p * rb)));
      _mm256_store_ps(ds[p], _mm256_cvtph_ps(h));  // exact
    }
    asm volatile("" ::: "memory");  // the scales are broadcast from memory
    q80_blocks<R, P, G>(blk, rb, ds, x + b * 32, w.k, acc);
  }
  for (; b < n_blocks; ++b) {
    const uint8_t* blk = rows + b * kBytes;
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) ds[p][0] = qdecode::f16(blk + p * rb);
    q80_blocks<R, P, 1>(blk, rb, ds, x + b * 32, w.k, acc);
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) y[r * w.n + n0 + p] = V::sum(V{acc[r][p]});
}

#undef QD_INLINE

}  // namespace
}  // namespace invar::qdirect512
