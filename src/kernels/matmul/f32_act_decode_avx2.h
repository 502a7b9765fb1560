// Private to the quantised matmul (f32_act_simd.h): AVX2 few-rows (decode) kernels for the
// types of Q8_0, Q4_K_M and Q5_K_M files (Q8_0, Q4_K, Q5_K, Q6_K), with the bits of the generic
// path (f32_act_unpack.h).
//
// At M = 1 each weight feeds one FMA, so the cost per 16 weights is what it takes to decode
// them. The generic decoders suit AVX-512, where a 16-entry table lookup is one vpermps; on AVX2
// the same lookup is two vpermps, a shift and a blend per 8 lanes, all on the shuffle ports.
// Here every code is widened once from memory to 32-bit lanes (vpmovzxbd / vpmovsxbd: one
// shuffle per 8 weights), its bit fields are cut with 32-bit shifts and masks (any ALU port),
// and the weight is computed, not looked up:
//   - Q4_K / Q5_K: fma(d·scale, code, −dmin·min), the FMA the generic table entries are made
//     with (exact product, one rounding), lane by lane;
//   - Q6_K: the codes of block b + 1 (6 bits − 32, as signed bytes) are unpacked with 256-bit
//     byte operations while block b computes, then each 8 are widened from memory and multiplied
//     by d·scale (exact);
//   - Q8_0: q·d (exact), the 8 F16 scales of a row's 8 blocks converted in one instruction.
// Both 8-lane halves of a 16-lane accumulator run side by side: lane l of half h sees
// k ≡ 8h + l (mod 16) in ascending k, one FMA per term, then V::sum — the canonical order.
//
// Templates over V (vec_avx2.h) so that the AVX-512 translation unit, which includes this header
// through f32_act_simd.h, never instantiates them.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/detmath_simd.h"  // <immintrin.h>, with GCC bug 105593 silenced
#include "kernels/matmul/f32_act.h"
#include "kernels/matmul/f32_act_unpack.h"

namespace invar::qdirect256 {
namespace {

#define QD2_INLINE inline __attribute__((always_inline))

QD2_INLINE __m256i widen_u8(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
QD2_INLINE __m256i widen_i8(const int8_t* p) {
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

// Weight rows side by side for R activation rows: 2 at M = 1 (4 FMA chains, while each FMA
// waits on its weight's decoding; 4 rows measured no faster from L3 and spill accumulators),
// one above (the R rows' chains cover the latency).
template <int R>
constexpr int panels() {
  return R == 1 ? 2 : 1;
}

// R activation rows × P weight rows of 16-lane accumulators, two halves each.
template <int R, int P>
struct Acc {
  __m256 v[R][P][2];
  QD2_INLINE Acc() {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) v[r][p][0] = v[r][p][1] = _mm256_setzero_ps();
  }
  // acc[r][p] half h += wv · x[r][8h ..] for every activation row r.
  QD2_INLINE void fma(int p, int h, __m256 wv, const float* x, int64_t ldx) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      v[r][p][h] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + r * ldx + 8 * h), v[r][p][h]);
  }
  template <class V>
  QD2_INLINE void store(float* y, int64_t ldy, int64_t n0) const {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) y[r * ldy + n0 + p] = V::sum(V{{v[r][p][0]}, {v[r][p][1]}});
  }
};

// Q4_K (kFifth false) and Q5_K (true), R activation rows × P weight rows from row n0. Chunk c (16
// weights) of a block takes the low (c & 2 == 0) or high nibbles of qs[32·(c / 4) + 16·(c % 2) ..]
// and sub-block c / 2's scales; Q5_K adds 16 where bit c / 2 of qh[16·(c % 2) ..] is set
// (qdecode::Q4_K, qdecode::Q5_K).
template <class V, int R, int P, bool kFifth>
void k4_rows(const QuantView& w, int64_t n0, const float* x, float* y) {
  constexpr int kBytes = kFifth ? 176 : 144, kQs = kFifth ? 48 : 16, kQh = 16;
  const __m256i lo4 = _mm256_set1_epi32(0x0f), bit4 = _mm256_set1_epi32(0x10);
  const uint8_t* row[P];
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p) row[p] = w.data + (n0 + p) * w.row_bytes;
  Acc<R, P> acc;
  alignas(32) float d1[P][8], nm1[P][8];
  // Q5_K: bit s of each 32-bit lane of qh moved to bit 4, the other bits cleared, or-ed in.
  auto fifth = [&](__m256i code, const uint8_t* qh, int s) __attribute__((always_inline)) {
    if constexpr (!kFifth) return code;
    const __m256i hv = widen_u8(qh);
    const __m256i m = s <= 4 ? _mm256_slli_epi32(hv, 4 - s) : _mm256_srli_epi32(hv, s - 4);
    return _mm256_or_si256(code, _mm256_and_si256(m, bit4));
  };
  const int64_t n_blocks = w.k / 256;
  for (int64_t b = 0; b < n_blocks; ++b) {
    qdecode::prefetch_ahead(row[0], P * w.row_bytes, P * kBytes, b);
    const uint8_t* blk[P];
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
      blk[p] = row[p] + b * kBytes;
      qdecode::k4_scales(blk[p] + 4, qdecode::f16(blk[p]), qdecode::f16(blk[p] + 2), d1[p], nm1[p]);
    }
    asm volatile("" ::: "memory");  // the scales are broadcast from memory (loads, not shuffles)
    const float* xb = x + b * 256;
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) {
        const uint8_t* qs = blk[p] + kQs + 32 * j;
        const uint8_t* qh = blk[p] + kQh;
        const __m256 da = _mm256_broadcast_ss(&d1[p][2 * j]);
        const __m256 ma = _mm256_broadcast_ss(&nm1[p][2 * j]);
        const __m256 db = _mm256_broadcast_ss(&d1[p][2 * j + 1]);
        const __m256 mb = _mm256_broadcast_ss(&nm1[p][2 * j + 1]);
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          // Bytes of chunks 4j / 4j + 2 (i0) and 4j + 1 / 4j + 3 (i1), lanes 8h ..
          const __m256i i0 = widen_u8(qs + 8 * h), i1 = widen_u8(qs + 16 + 8 * h);
          const uint8_t *h0 = qh + 8 * h, *h1 = qh + 16 + 8 * h;
          const __m256 q[4] = {
              _mm256_cvtepi32_ps(fifth(_mm256_and_si256(i0, lo4), h0, 2 * j)),
              _mm256_cvtepi32_ps(fifth(_mm256_and_si256(i1, lo4), h1, 2 * j)),
              _mm256_cvtepi32_ps(fifth(_mm256_srli_epi32(i0, 4), h0, 2 * j + 1)),
              _mm256_cvtepi32_ps(fifth(_mm256_srli_epi32(i1, 4), h1, 2 * j + 1)),
          };
#pragma GCC unroll 4
          for (int c = 0; c < 4; ++c) {
            const __m256 wv = _mm256_fmadd_ps(c < 2 ? da : db, q[c], c < 2 ? ma : mb);
            acc.fma(p, h, wv, xb + 64 * j + 16 * c, w.k);
          }
        }
      }
    }
  }
  acc.template store<V>(y, w.n, n0);
}

// Q6_K, R activation rows × P weight rows from row n0. Half h of a block (128 weights) takes its
// low nibbles from ql[64h .. 64h + 64) — group g of 32 bytes: ql[64h + 32(g % 2) ..], low nibbles
// for g < 2, high ones for g ≥ 2 — and its 2 high bits from qh[32h .. 32h + 32) >> 2g. Group g's
// 32 codes are chunks 8h + 2g and 8h + 2g + 1, in that order: the unpacked codes are in chunk
// order, and chunk c has scale d·sc[c] (qdecode::Q6_K).
template <class V, int R, int P>
void q6k_rows(const QuantView& w, int64_t n0, const float* x, float* y) {
  constexpr int kBytes = 210;
  const uint8_t* row[P];
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p) row[p] = w.data + (n0 + p) * w.row_bytes;
  Acc<R, P> acc;
  // Block b's codes and scales are unpacked during block b − 1 (two buffers): the 8-byte loads
  // that widen them then find them in the cache, not in flight behind a 32-byte store.
  alignas(32) float ds_buf[2][P][16];
  alignas(32) int8_t codes_buf[2][P][256];
  const __m256i lo4 = _mm256_set1_epi8(0x0f), bits45 = _mm256_set1_epi8(0x30);
  const __m256i k32 = _mm256_set1_epi8(32);
  auto unpack = [&](int64_t b) __attribute__((always_inline)) {
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
      const uint8_t* blk = row[p] + b * kBytes;
      const float d = qdecode::f16(blk + 208);
      const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192));
      qdecode::scaled_i8(sc, d, ds_buf[b & 1][p]);
      qdecode::scaled_i8(_mm_srli_si128(sc, 8), d, ds_buf[b & 1][p] + 8);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h));
        const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h + 32));
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * h));
        // Byte fields through 16-bit shifts: bits crossing from the neighbour byte are masked off.
        const __m256i g[4] = {
            _mm256_or_si256(_mm256_and_si256(ql0, lo4),
                            _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45)),
            _mm256_or_si256(_mm256_and_si256(ql1, lo4),
                            _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), lo4),
                            _mm256_and_si256(qh, bits45)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), lo4),
                            _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45)),
        };
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i)
          _mm256_store_si256(reinterpret_cast<__m256i*>(codes_buf[b & 1][p] + 128 * h + 32 * i),
                             _mm256_sub_epi8(g[i], k32));
      }
    }
  };
  const int64_t n_blocks = w.k / 256;
  if (n_blocks > 0) unpack(0);
  for (int64_t b = 0; b < n_blocks; ++b) {
    qdecode::prefetch_ahead(row[0], P * w.row_bytes, P * kBytes, b);
    if (b + 1 < n_blocks) unpack(b + 1);
    asm volatile("" ::: "memory");  // codes and scales are read back from memory
    const float(*ds)[16] = ds_buf[b & 1];
    const int8_t(*codes)[256] = codes_buf[b & 1];
    const float* xb = x + b * 256;
#pragma GCC unroll 16
    for (int c = 0; c < 16; ++c) {
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) {
        const __m256 d = _mm256_broadcast_ss(&ds[p][c]);
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const __m256 wv =
              _mm256_mul_ps(d, _mm256_cvtepi32_ps(widen_i8(codes[p] + 16 * c + 8 * h)));
          acc.fma(p, h, wv, xb + 16 * c, w.k);
        }
      }
    }
  }
  acc.template store<V>(y, w.n, n0);
}

// Q8_0, R activation rows × P weight rows from row n0, 8 blocks (256 weights) of each row a
// step: weight q·d (exact), the 8 F16 scales converted together.
template <class V, int R, int P>
void q80_rows(const QuantView& w, int64_t n0, const float* x, float* y) {
  constexpr int kBytes = 34, G = 8;
  const int64_t rb = w.row_bytes;
  const uint8_t* rows = w.data + n0 * rb;
  Acc<R, P> acc;
  alignas(32) float ds[P][8];
  const int64_t n_blocks = w.k / 32;
  // n_g blocks of each row from blk; the accumulators' indices never depend on g.
  auto blocks = [&](const uint8_t* blk, const float* xb, int n_g) __attribute__((always_inline)) {
#pragma GCC unroll 8
    for (int g = 0; g < n_g; ++g) {
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) {
        const __m256 d = _mm256_broadcast_ss(&ds[p][g]);
        const int8_t* q = reinterpret_cast<const int8_t*>(blk + p * rb + kBytes * g + 2);
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) {  // chunk 2g + i / 2, half i % 2
          const __m256 wv = _mm256_mul_ps(_mm256_cvtepi32_ps(widen_i8(q + 8 * i)), d);
          acc.fma(p, i & 1, wv, xb + 32 * g + 16 * (i >> 1), w.k);
        }
      }
    }
  };
  int64_t b = 0;
  for (; b + G <= n_blocks; b += G) {
    qdecode::prefetch_ahead(rows, P * rb, P * G * kBytes, b / G);
    const uint8_t* blk = rows + b * kBytes;
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
      alignas(16) uint16_t h[8];
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) std::memcpy(&h[g], blk + p * rb + kBytes * g, 2);
      _mm256_store_ps(ds[p], _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h))));
    }
    asm volatile("" ::: "memory");  // the scales are broadcast from memory
    blocks(blk, x + b * 32, G);
  }
  for (; b < n_blocks; ++b) {
    const uint8_t* blk = rows + b * kBytes;
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) ds[p][0] = qdecode::f16(blk + p * rb);
    asm volatile("" ::: "memory");
    blocks(blk, x + b * 32, 1);
  }
  acc.template store<V>(y, w.n, n0);
}

#undef QD2_INLINE

}  // namespace
}  // namespace invar::qdirect256
