// Private to the matmul kernels (f32_act_simd.h): the product for many activation rows (prefill),
// every weight type, over a 16-float vector type V (vec_avx2.h, vec_avx512.h).
//
// Every output keeps one 16-lane accumulator whose lane l sees k ≡ l (mod 16) in ascending k, one
// FMA per term, and ends with the reduce.h tree: the canonical order of f32_act.h. Which outputs
// run side by side, how K is cut into chunks (an accumulator parked in the scratch between chunks
// is stored and reloaded unchanged), where activations and weights are read from (the caller's
// rows or a packed copy, the file or a dequantised copy: the same values) change no bit.
//
// Loop order (qprefill_plan in f32_act.h gives the sizes), per block of activation rows (as many
// as keep the block's packed activations in L2):
//   pack the block's rows once (64-byte aligned, each tile's rows one sequential stream);
//   for each group of weight rows, for each K-chunk:
//     dequantise the group's chunk once into the L1 buffer (F32 is copied, F16/BF16 widened);
//     run every register tile of the block over it (R activation rows × C outputs; a block whose
//     rows are not a multiple of R gets tiles of R and R − 1 rows, not one nearly empty tile),
//     prefetching the next chunk's weight bytes a slice per tile.
// So each weight is dequantised once per row block, every activation vector comes from L2 once
// per group, and a chunk of up to 1024 k parks each accumulator at most once per 64 FMAs.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/matmul/f32_act.h"
#include "kernels/matmul/f32_act_dense.h"
#include "kernels/matmul/f32_act_unpack.h"

namespace invar::qprefill {
namespace {

#define QP_INLINE inline __attribute__((always_inline))

// The activation rows of one tile: row r's 16 values of step s (k = k0 + 16s ..) at
// at + r·row + s·step. Packed: row = 16, step = 16·rows; in place: row = K, step = 16. For a V of
// two halves (split_halves<V>()) the 8 values of half h are at at + h·half + r·row + s·step:
// packed half-major (row = 8, step = 8·rows, half = rows·kc / 2), so each half's pass reads whole
// cache lines; in place half = 8.
struct TileRows {
  const float* at;
  int64_t row, step, half;
};

// V runs its tiles one 8-lane half at a time (vec_avx2.h): packed activations and dequantised
// weights are then stored half-major.
template <class V>
constexpr bool split_halves() {
  return requires {
    V::kSplitHalves;
  };
}

// y[r·ldy + c] = V::sum(acc[r][c]), 16 outputs per V::sum16 where the ISA has it, a last 8 or
// fewer per V::sum8 (the same additions in the same order).
template <class V, int R, int C>
QP_INLINE void tile_sums(const V (&acc)[R][C], float* y, int64_t ldy) {
  if constexpr (requires(const V(&a)[16], float* o) { V::sum16(a, o); }) {
    constexpr int kN = R * C;
    float out[(kN + 15) / 16 * 16];
#pragma GCC unroll 4
    for (int i0 = 0; i0 < kN; i0 += 16) {
      if constexpr (requires(const V(&a)[8], float* o) { V::sum8(a, o); }) {
        if (kN - i0 <= 8) {  // a last, half-empty sum16 (the 4 × 6 tile's outputs 16..23)
          V a[8];
#pragma GCC unroll 8
          for (int i = 0; i < 8; ++i)
            a[i] = i0 + i < kN ? acc[(i0 + i) / C][(i0 + i) % C] : V::zero();
          V::sum8(a, out + i0);
          continue;
        }
      }
      V a[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) a[i] = i0 + i < kN ? acc[(i0 + i) / C][(i0 + i) % C] : V::zero();
      V::sum16(a, out + i0);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) y[r * ldy + c] = out[r * C + c];
    }
  } else {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) y[r * ldy + c] = V::sum(acc[r][c]);
    }
  }
}

// The lines a tile stores when it ends (its park slot, or its outputs' parts of R rows of y),
// claimed for writing while it computes: they are rarely in L1 (a row block's park slots take
// more than L1, y rows are N floats apart), and stores that miss stalled the next tile.
template <int R, int C>
QP_INLINE void store_prefetch(float* park, bool last, float* y, int64_t ldy) {
  if (last) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      __builtin_prefetch(y + r * ldy, 1, 3);
      __builtin_prefetch(y + r * ldy + C - 1, 1, 3);
    }
  } else {
#pragma GCC unroll 8
    for (int i = 0; i < R * C; ++i) __builtin_prefetch(park + i * 16, 1, 3);
  }
}

// One register tile of R activation rows × C outputs over `steps` × 16 weights (output c's at
// wb + c·ldw). Lane accumulators start at +0 (first chunk) or come from the tile's slot in the
// park ([R][C][16]); after the last chunk they are summed into y, else parked.
template <class V, int R, int C>
void tile(const float* wb, int64_t ldw, int64_t steps, TileRows x, float* park, bool first,
          bool last, float* y, int64_t ldy) {
  V acc[R][C];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = first ? V::zero() : V::load(park + (r * C + c) * 16);
  }
  store_prefetch<R, C>(park, last, y, ldy);
  const float* xs = x.at;
  for (int64_t s = 0; s < steps; ++s, xs += x.step) {
    V wv[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) wv[c] = V::load(wb + c * ldw + 16 * s);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const V xv = V::load(xs + r * x.row);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) acc[r][c] = V::fma(wv[c], xv, acc[r][c]);
    }
  }
  if (last) return tile_sums<V, R, C>(acc, y, ldy);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) V::store(park + (r * C + c) * 16, acc[r][c]);
  }
}

// tile() for a V of two 8-lane halves (vec_avx2.h, V::kSplitHalves): the tile runs its steps once
// per half, lanes 0..7 of every accumulator, then lanes 8..15 (each lane's own k order is
// unchanged), so it holds R × C 8-lane accumulators and R + C operands in the 16 ymm registers
// instead of twice as many: a 4 × 3 tile reads 7 vectors per 12 FMAs, where the 2 × 2 tile of
// whole accumulators read 8 per 8. The halves meet in the park slot, summed after the second.
template <class V, int R, int C>
void tile_halves(const float* wb, int64_t ldw, int64_t steps, TileRows x, float* park, bool first,
                 bool last, float* y, int64_t ldy) {
  using N = typename V::Narrow;
  store_prefetch<R, C>(park, last, y, ldy);
#pragma GCC unroll 1
  for (int h = 0; h < 2; ++h) {
    N acc[R][C];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c)
        acc[r][c] = first ? N::zero() : N::load(park + (r * C + c) * 16 + 8 * h);
    }
    // Half-major weights (decode_group): half h of output c's step s at wb + c·ldw + h·ldw/2 + 8s.
    const float* xs = x.at + h * x.half;
    const float* ws = wb + h * (ldw / 2);
    for (int64_t s = 0; s < steps; ++s, xs += x.step, ws += 8) {
      N wv[C];
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) wv[c] = N::load(ws + c * ldw);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const N xv = N::load(xs + r * x.row);
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) acc[r][c] = N::fma(wv[c], xv, acc[r][c]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) N::store(park + (r * C + c) * 16 + 8 * h, acc[r][c]);
    }
  }
  if (!last) return;
  V acc[R][C];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = V::load(park + (r * C + c) * 16);
  }
  tile_sums<V, R, C>(acc, y, ldy);
}

// A tile of `rows` (<= R) × `cols` (<= C) outputs.
template <class V, int R, int C>
void tile_any(int64_t rows, int64_t cols, const float* wb, int64_t ldw, int64_t steps, TileRows x,
              float* park, bool first, bool last, float* y, int64_t ldy) {
  if constexpr (R > 1) {
    if (rows < R)
      return tile_any<V, R - 1, C>(rows, cols, wb, ldw, steps, x, park, first, last, y, ldy);
  }
  if constexpr (C > 1) {
    if (cols < C)
      return tile_any<V, R, C - 1>(rows, cols, wb, ldw, steps, x, park, first, last, y, ldy);
  }
  if constexpr (split_halves<V>())
    tile_halves<V, R, C>(wb, ldw, steps, x, park, first, last, y, ldy);
  else
    tile<V, R, C>(wb, ldw, steps, x, park, first, last, y, ldy);
}

// The row tiles of a block of `rows` activation rows: as few as hold R rows each, their sizes
// differing by at most one (37 rows: 7 tiles of 4 and 3 of 3, not 9 of 4 and one of 1).
struct RowTiles {
  int64_t count, small, n_large;  // tile t has small + (t < n_large) rows
  RowTiles(int64_t rows, int64_t R)
      : count((rows + R - 1) / R), small(rows / count), n_large(rows % count) {}
  int64_t rows(int64_t t) const { return small + (t < n_large); }
  int64_t first(int64_t t) const { return t * small + std::min(t, n_large); }
};

// The block's activation rows x[rows][K] (stride K) packed chunk by chunk (chunks of kc), then
// tile by tile, then 16-k step by step: chunk [k0, k0 + kc) of the tile of rows r0.. (nr rows)
// starts at panel + rows·k0 + r0·kc, and holds its steps one after the other, each nr rows × 16
// floats.
template <class V>
void pack_rows(const float* x, int64_t K, int64_t chunk, const RowTiles& rt, int64_t rows,
               float* panel) {
  for (int64_t k0 = 0; k0 < K; k0 += chunk) {
    const int64_t kc = std::min(chunk, K - k0);
    for (int64_t t = 0; t < rt.count; ++t) {
      const int64_t nr = rt.rows(t), r0 = rt.first(t);
      float* dst = panel + rows * k0 + r0 * kc;
      const float* src = x + r0 * K + k0;
      if constexpr (split_halves<V>()) {
        using N = typename V::Narrow;
        for (int64_t s = 0; s < kc; s += 16) {
          for (int64_t r = 0; r < nr; ++r, dst += 8) {
            N::store(dst, N::load(src + r * K + s));
            N::store(dst + nr * kc / 2, N::load(src + r * K + s + 8));
          }
        }
      } else {
        for (int64_t s = 0; s < kc; s += 16) {
          for (int64_t r = 0; r < nr; ++r, dst += 16) V::store(dst, V::load(src + r * K + s));
        }
      }
    }
  }
}

// Rows [n0, n0 + np), weights [k0, k0 + kc), dequantised into wb[np][kc] (half-major within
// each row for split_halves<V>(): lanes 0..7 of every 16, then lanes 8..15).
template <class V, class D>
void decode_group(const QuantView& w, int64_t n0, int64_t np, int64_t k0, int64_t kc, float* wb) {
  const int64_t b0 = k0 / D::kBlock, b1 = (k0 + kc) / D::kBlock;
  for (int64_t p = 0; p < np; ++p) {
    const uint8_t* row = w.data + (n0 + p) * w.row_bytes;
    for (int64_t b = b0; b < b1; ++b) {
      const D dec(row + b * D::kBytes);
      if constexpr (split_halves<V>()) {
        float* lo = wb + p * kc + (b * D::kBlock - k0) / 2;
#pragma GCC unroll 16
        for (int c = 0; c < D::kBlock / 16; ++c) {
          const V v = dec.chunk(c);
          V::Narrow::store(lo + 8 * c, v.lo);
          V::Narrow::store(lo + kc / 2 + 8 * c, v.hi);
        }
      } else {
        float* dst = wb + p * kc + (b * D::kBlock - k0);
#pragma GCC unroll 16
        for (int c = 0; c < D::kBlock / 16; ++c) V::store(dst + 16 * c, dec.chunk(c));
      }
    }
  }
}

// The weight bytes of the chunk decoded after the current one (the same rows further on, the next
// group's first chunk, or at the last group of a row block the first group of the next block),
// fetched a slice at a time while the tiles run over the current one, so they arrive from DRAM
// without a burst that would evict the working set. After the job's last chunk nothing is fetched:
// rows past n1 belong to another job. first() fetches a job's first chunk whole, before the
// activations are packed, so that packing overlaps its arrival (an expert's product is often one
// row block: without it each job started on a cold chunk).
template <class D>
class ChunkPrefetch {
 public:
  // The chunk after (n0 group, k0) of a job over outputs [job_n0, job_n1); more_blocks: another
  // row block follows this one.
  ChunkPrefetch(const QuantView& w, const QPrefillPlan& plan, int64_t n0, int64_t k0,
                int64_t job_n0, int64_t job_n1, bool more_blocks, int64_t slices)
      : slices_(slices) {
    const bool group_end = k0 + plan.k_chunk >= w.k;
    int64_t next_n0 = group_end ? n0 + plan.group_rows : n0;
    if (next_n0 >= job_n1) next_n0 = more_blocks ? job_n0 : job_n1;
    const int64_t next_k0 = group_end ? 0 : k0 + plan.k_chunk;
    set(w, plan, next_n0, next_k0, job_n1);
  }
  // A job's first chunk, all of it at once.
  static QP_INLINE void first(const QuantView& w, const QPrefillPlan& plan, int64_t job_n0,
                              int64_t job_n1) {
    ChunkPrefetch p;
    p.slices_ = 1;
    p.set(w, plan, job_n0, 0, job_n1);
    p.slice(0);
  }
  // Slice `i` of `slices`.
  QP_INLINE void slice(int64_t i) const {
    const int64_t l0 = lines_ * i / slices_, l1 = lines_ * (i + 1) / slices_;
    int64_t p = l0 / lines_per_row_, o = l0 % lines_per_row_;
    for (int64_t l = l0; l < l1; ++l) {
      const char* at = reinterpret_cast<const char*>(at_ + p * row_bytes_ + o * 64);
      if (to_l1_)
        _mm_prefetch(at, _MM_HINT_T0);
      else
        _mm_prefetch(at, _MM_HINT_T1);
      if (++o == lines_per_row_) {
        o = 0;
        ++p;
      }
    }
  }

 private:
  ChunkPrefetch() = default;
  void set(const QuantView& w, const QPrefillPlan& plan, int64_t n0, int64_t k0, int64_t job_n1) {
    const int64_t kc = std::min(plan.k_chunk, w.k - k0);
    const int64_t rows = std::max<int64_t>(0, std::min(plan.group_rows, job_n1 - n0));
    at_ = w.data + n0 * w.row_bytes + k0 / D::kBlock * D::kBytes;
    row_bytes_ = w.row_bytes;
    lines_per_row_ = (kc / D::kBlock * D::kBytes + 63) / 64;
    lines_ = rows * lines_per_row_;
    // A large chunk (F32) goes to L2 only: in L1 it would evict the chunk being computed.
    to_l1_ = lines_ * 64 <= 8192;
  }

  const uint8_t* at_ = nullptr;
  int64_t row_bytes_ = 0, lines_per_row_ = 1, lines_ = 0, slices_ = 1;
  bool to_l1_ = false;
};

// Scratch regions, each 64-byte aligned (kQScratchFloats covers the alignment).
struct Scratch {
  float *wb, *park, *panel;
  explicit Scratch(float* s) {
    auto align = [](float* p) {
      return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t(63));
    };
    wb = align(s);
    park = align(wb + kQPanelWeights);
    panel = align(park + kQMBlockMax * kQGroupRowsMax * 16);
  }
};

// Outputs [n0, n1) of `rows` activation rows (rows > V::kDirectRows); K a multiple of 16.
template <class V, class D>
void tiles_run(const QuantView& w, const float* x, int64_t rows, float* y, int64_t n0, int64_t n1,
               float* scratch) {
  constexpr int R = V::kQTileRows, C = V::kQTileCols;
  static_assert(kQGroupRowsMax % C == 0 && kQGroupRowsLargeK % C == 0 && kQMBlockMax % R == 0);
  static_assert((kQPanelWeights / kQGroupRowsMax) % 256 == 0, "a chunk holds whole blocks");
  const Scratch sc(scratch);
  const int64_t K = w.k, N = w.n;
  const int64_t panel_floats = qprefill_panel_floats();
  const QPrefillPlan plan = qprefill_plan(rows, K, R, panel_floats);
  for (int64_t m0 = 0; m0 < rows; m0 += plan.block_rows) {
    const int64_t mb = std::min(plan.block_rows, rows - m0);
    const RowTiles rt(mb, R);
    const bool packed = mb * K <= panel_floats;
    if (m0 == 0) ChunkPrefetch<D>::first(w, plan, n0, n1);
    if (packed) pack_rows<V>(x + m0 * K, K, plan.k_chunk, rt, mb, sc.panel);
    for (int64_t g = n0; g < n1; g += plan.group_rows) {
      const int64_t np = std::min(plan.group_rows, n1 - g);
      for (int64_t k0 = 0; k0 < K; k0 += plan.k_chunk) {
        const int64_t kc = std::min(plan.k_chunk, K - k0);
        // F32 rows are copied too: read in place (stride K) they measured 10-20% slower.
        decode_group<V, D>(w, g, np, k0, kc, sc.wb);
        const float* wb = sc.wb;
        const int64_t ldw = kc;
        const ChunkPrefetch<D> prefetch(w, plan, g, k0, n0, n1, m0 + mb < rows, rt.count);
        for (int64_t t = 0; t < rt.count; ++t) {
          prefetch.slice(t);
          const int64_t nr = rt.rows(t), r0 = rt.first(t);
          const TileRows xr =
              packed ? (split_halves<V>()
                            ? TileRows{sc.panel + mb * k0 + r0 * kc, 8, 8 * nr, nr * kc / 2}
                            : TileRows{sc.panel + mb * k0 + r0 * kc, 16, 16 * nr, 0})
                     : TileRows{x + (m0 + r0) * K + k0, K, 16, 8};
          float* park = sc.park + t * R * plan.group_rows * 16;
          for (int64_t c0 = 0; c0 < np; c0 += C) {
            tile_any<V, R, C>(nr, std::min<int64_t>(C, np - c0), wb + c0 * ldw, ldw, kc / 16, xr,
                              park + c0 * R * 16, k0 == 0, k0 + kc == K, y + (m0 + r0) * N + g + c0,
                              N);
          }
        }
      }
    }
  }
}

#undef QP_INLINE

}  // namespace
}  // namespace invar::qprefill
