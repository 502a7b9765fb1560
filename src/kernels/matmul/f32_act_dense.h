// Private to the matmul kernels (f32_act_simd.h): F32, F16 and BF16 weights in the canonical lane
// order every type shares (f32_act.h, rule N1), read in place from the file's row-major rows.
//
// Lane l of output (m, n) accumulates k = l, l+16, … with one FMA per term from +0, and y[m][n] is
// the reduce.h tree over the 16 lanes. A row is consumed 16 consecutive weights at a time, exactly
// as stored, so the weights stream from DRAM without any transpose. F16 and BF16 widen exactly to
// F32; the widened values are the scalar reference's.
//
// Few rows (decode, rows_dense): P weight rows side by side, each an independent FMA chain, every
// weight vector used for R activation rows. At M = 1 (AVX-512) 16 rows (two groups of 8) have
// their 16 lane vectors summed at once by V::sum16, which performs each output's reduce.h
// additions in shuffled registers. When K is not a multiple of 16 the last partial step goes
// through a staged, zero-padded weight vector and V::fma_n, which leaves lanes past K untouched:
// they keep exactly the terms the scalar reference gives them.
//
// Many rows: the decoders F32/F16/BF16 below feed the quantised path's dequantise-then-tile loop
// (f32_act_simd.h decode_group), 16 weights per block.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/detmath_simd.h"  // <immintrin.h>, with GCC bug 105593 silenced
#include "kernels/matmul/f32_act.h"
#include "quant/dtype.h"

namespace invar::qdense {
namespace {

#define QDENSE_INLINE inline __attribute__((always_inline))

template <DType T>
inline constexpr int64_t kElemBytes = T == DType::F32 ? 4 : 2;

// w[k .. k+16) of a row as exact F32.
template <class V, DType T>
QDENSE_INLINE V weights16(const uint8_t* row, int64_t k) {
  if constexpr (T == DType::F32) {
    return V::load(reinterpret_cast<const float*>(row) + k);
  } else if constexpr (T == DType::F16) {
    return V::from_f16(reinterpret_cast<const uint16_t*>(row) + k);
  } else {
    static_assert(T == DType::BF16);
    return V::from_bf16(reinterpret_cast<const uint16_t*>(row) + k);
  }
}

// w[k .. k+n) (n < 16) as exact F32, zeros after; rare (K % 16 != 0), so staged, not masked.
template <class V, DType T>
V weights_tail(const uint8_t* row, int64_t k, int64_t n) {
  alignas(64) float stage[16] = {};
  for (int64_t j = 0; j < n; ++j) {
    if constexpr (T == DType::F32) {
      stage[j] = reinterpret_cast<const float*>(row)[k + j];
    } else if constexpr (T == DType::F16) {
      stage[j] = f16_to_f32(reinterpret_cast<const uint16_t*>(row)[k + j]);
    } else {
      stage[j] = bf16_to_f32(reinterpret_cast<const uint16_t*>(row)[k + j]);
    }
  }
  return V::load(stage);
}

// Decoders of the many-rows path (the qdecode interface): a block is 16 consecutive weights.
template <class V, DType T>
struct Dense {
  static constexpr int kBlock = 16, kBytes = 16 * int(kElemBytes<T>);
  const uint8_t* p;
  QDENSE_INLINE explicit Dense(const uint8_t* b) : p(b) {}
  QDENSE_INLINE V chunk(int) const { return weights16<V, T>(p, 0); }
};

// Bytes ahead of the step being read that each of the P rows prefetches. The hardware prefetchers
// follow one stream well but not 16 interleaved ones that each end within a few pages; past the
// end of its row, a row prefetches the same row of the next group of P (the row P further on),
// so the next group's rows arrive while this group finishes.
inline constexpr int64_t kDensePrefetchBytes = 1024;

// R activation rows (x, stride K) × P weight rows from n0: the lane accumulators acc[r][p].
template <class V, DType T, int R, int P>
QDENSE_INLINE void rows_accumulate(const QuantView& w, int64_t n0, const float* x, V (&acc)[R][P]) {
  constexpr int64_t es = kElemBytes<T>;
  constexpr int64_t kUnroll = 64 / (16 * es);  // 16-weight steps per cache line
  const int64_t K = w.k, kv = K / 16 * 16;
  const uint8_t* row[P];
#pragma GCC unroll 16
  for (int p = 0; p < P; ++p) row[p] = w.data + (n0 + p) * w.row_bytes;
  const int64_t next_group = (P - 1) * w.row_bytes;
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int p = 0; p < P; ++p) acc[r][p] = V::zero();
  }
  auto step = [&](int64_t k) __attribute__((always_inline)) {
    V wv[P];
#pragma GCC unroll 16
    for (int p = 0; p < P; ++p) wv[p] = weights16<V, T>(row[p], k);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const V xv = V::load(x + r * K + k);
#pragma GCC unroll 16
      for (int p = 0; p < P; ++p) acc[r][p] = V::fma(wv[p], xv, acc[r][p]);
    }
  };
  int64_t k = 0;
  for (; k + 16 * kUnroll <= kv; k += 16 * kUnroll) {
    int64_t ahead = k * es + kDensePrefetchBytes;
    if (ahead >= w.row_bytes) ahead += next_group;
#pragma GCC unroll 16
    for (int p = 0; p < P; ++p) {
      _mm_prefetch(reinterpret_cast<const char*>(row[p] + ahead), _MM_HINT_T0);
    }
#pragma GCC unroll 4
    for (int64_t u = 0; u < kUnroll; ++u) step(k + 16 * u);
  }
  for (; k < kv; k += 16) step(k);
  if (kv < K) {
    V wv[P];
    for (int p = 0; p < P; ++p) wv[p] = weights_tail<V, T>(row[p], kv, K - kv);
    for (int r = 0; r < R; ++r) {
      const V xv = V::load_n(x + r * K + kv, K - kv);
      for (int p = 0; p < P; ++p) acc[r][p] = V::fma_n(wv[p], xv, acc[r][p], K - kv);
    }
  }
}

// R activation rows × P weight rows from n0, into y[r·N + n0 + p].
template <class V, DType T, int R, int P>
void rows_dense(const QuantView& w, int64_t n0, const float* x, float* y) {
  V acc[R][P];
  rows_accumulate<V, T, R, P>(w, n0, x, acc);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int p = 0; p < P; ++p) y[r * w.n + n0 + p] = V::sum(acc[r][p]);
  }
}

template <class V>
concept HasSum16 = requires(const V (&a)[16], float* out) {
  V::sum16(a, out);
};

// One activation row × 16 weight rows from n0, as two groups of 8 (more rows side by side
// measured slower: 16 interleaved streams defeat the prefetchers), summed at once by V::sum16.
template <class V, DType T>
void rows16_dense(const QuantView& w, int64_t n0, const float* x, float* y) {
  V lo[1][8], hi[1][8];
  rows_accumulate<V, T, 1, 8>(w, n0, x, lo);
  rows_accumulate<V, T, 1, 8>(w, n0 + 8, x, hi);
  V all[16];
#pragma GCC unroll 8
  for (int p = 0; p < 8; ++p) {
    all[p] = lo[0][p];
    all[8 + p] = hi[0][p];
  }
  V::sum16(all, y + n0);
}

// `rows` (<= V::kDirectRows) activation rows, outputs [n0, n1).
template <class V, DType T, int R>
void direct_run(const QuantView& w, const float* x, int64_t rows, float* y, int64_t n0,
                int64_t n1) {
  if constexpr (R > 1) {
    if (rows < R) return direct_run<V, T, R - 1>(w, x, rows, y, n0, n1);
  }
  int64_t n = n0;
  if constexpr (R == 1 && HasSum16<V>) {
    for (; n + 16 <= n1; n += 16) rows16_dense<V, T>(w, n, x, y);
  }
  constexpr int P = V::template dense_direct_rows<R>();
  for (; n + P <= n1; n += P) rows_dense<V, T, R, P>(w, n, x, y);
  if constexpr (P > 4) {
    for (; n + 4 <= n1; n += 4) rows_dense<V, T, R, 4>(w, n, x, y);
  }
  for (; n < n1; ++n) rows_dense<V, T, R, 1>(w, n, x, y);
}

// Any number of rows through the few-rows kernels, kDirectRows at a time (the many-rows tiles need
// K to be a multiple of 16).
template <class V, DType T>
void direct_rows_all(const QuantView& w, const float* x, int64_t rows, float* y, int64_t n0,
                     int64_t n1) {
  for (int64_t r0 = 0; r0 < rows; r0 += V::kDirectRows) {
    direct_run<V, T, V::kDirectRows>(w, x + r0 * w.k, std::min<int64_t>(V::kDirectRows, rows - r0),
                                     y + r0 * w.n, n0, n1);
  }
}

#undef QDENSE_INLINE

}  // namespace
}  // namespace invar::qdense
