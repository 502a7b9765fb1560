// Private to the matmul kernels: the loops shared by the AVX2 and AVX-512 files, written over a
// 16-float vector type V that each file defines with its own intrinsics (vec_avx512.h: one
// __m512; vec_avx2.h: two __m256). V is local to its file, so every instantiation here is too: no
// ODR clash between ISAs.
//
// Every output lane runs the canonical chain acc = fma(w[n][k], x[m][k], acc), k = 0..K-1, from
// acc = +0 (matmul.h). Weights reach the chain as exact F32 values (F16/BF16 widen exactly;
// quantised weights take qmatmul_tiles.h), read from the file's rows and transposed in registers
// (matmul_rows.h), which moves bits and nothing else. Tiling in M and N only chooses which chains
// run side by side; K-blocking parks a chain's accumulator in y between blocks, which stores and
// reloads the same float. Hence the bits do not depend on M, on the tile shape, on the vector
// width or on the thread split.
//
// V provides: zero, load, store, store_n, bcast, fma, from_f16, from_bf16, transpose16, and the
// tuning constants kTileRows/kTilePanels (register tile of the many-rows path), kKBlock and
// kMBlock (its cache blocks) and kDirectRows (up to this many rows the weights stream once from
// the rows, see rows_direct).
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/matmul_rows.h"

namespace invar::matmul_tiles {
namespace {  // internal linkage: each ISA file gets its own copy

#define INVAR_TILE_INLINE inline __attribute__((always_inline))

// The 16 rows of panel p (rows past N repeat the last one: their outputs are never stored).
struct PanelRows {
  const uint8_t* row[kPanel];
};
INVAR_TILE_INLINE PanelRows panel_rows(const DenseView& w, int64_t p) {
  PanelRows r;
  for (int64_t i = 0; i < kPanel; ++i) {
    r.row[i] = w.data + std::min(p * kPanel + i, w.n - 1) * w.row_bytes;
  }
  return r;
}

// Weights w[row][k .. k+15] as exact F32.
template <class V, DType T>
INVAR_TILE_INLINE V weights_at(const uint8_t* row, int64_t k) {
  if constexpr (T == DType::F32) {
    return V::load(reinterpret_cast<const float*>(row) + k);
  } else if constexpr (T == DType::F16) {
    return V::from_f16(reinterpret_cast<const uint16_t*>(row) + k);
  } else {
    static_assert(T == DType::BF16);
    return V::from_bf16(reinterpret_cast<const uint16_t*>(row) + k);
  }
}

// t[j] lane i = w[row i][k + j] for j < 16: a 16 × 16 block of the panel, transposed.
template <class V, DType T>
INVAR_TILE_INLINE void block_load(const PanelRows& r, int64_t k, V (&t)[kPanel]) {
#pragma GCC unroll 16
  for (int i = 0; i < kPanel; ++i) t[i] = weights_at<V, T>(r.row[i], k);
  V::transpose16(t);
}

// The same for the last kr < 16 steps of K (t[j] for j >= kr is zero). Rare (K % 16 != 0), so
// through a small staging block rather than masked loads for every type.
template <class V>
void block_load_tail(const DenseView& w, const PanelRows& r, int64_t k, int64_t kr,
                     V (&t)[kPanel]) {
  alignas(64) float stage[kPanel][kPanel] = {};
  for (int i = 0; i < kPanel; ++i) {
    for (int64_t j = 0; j < kr; ++j) {
      const uint8_t* row = r.row[i];
      switch (w.type) {
        case DType::F32:
          stage[i][j] = reinterpret_cast<const float*>(row)[k + j];
          break;
        case DType::F16:
          stage[i][j] = f16_to_f32(reinterpret_cast<const uint16_t*>(row)[k + j]);
          break;
        default:
          stage[i][j] = bf16_to_f32(reinterpret_cast<const uint16_t*>(row)[k + j]);
          break;
      }
    }
  }
  for (int i = 0; i < kPanel; ++i) t[i] = V::load(stage[i]);
  V::transpose16(t);
}

// Accumulators of an R×P tile from y (n_valid outputs, starting at panel 0 of the tile).
template <class V, int R, int P>
INVAR_TILE_INLINE void tile_load(V (&acc)[R][P], const float* y, int64_t ldy, int64_t n_valid) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const int64_t lanes = n_valid - p * kPanel;
      const float* src = y + r * ldy + p * kPanel;
      acc[r][p] = lanes >= kPanel ? V::load(src) : V::load_n(src, int(lanes));
    }
  }
}

template <class V, int R, int P>
INVAR_TILE_INLINE void tile_store(const V (&acc)[R][P], float* y, int64_t ldy, int64_t n_valid) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const int64_t lanes = n_valid - p * kPanel;
      float* dst = y + r * ldy + p * kPanel;
      if (lanes >= kPanel) {
        V::store(dst, acc[r][p]);
      } else if (lanes > 0) {
        V::store_n(dst, acc[r][p], int(lanes));
      }
    }
  }
}

// acc[r][p] = fma(wv[p], x_r, acc[r][p]) for the whole tile, x_r = xk[r·xs]: one step of R×P
// chains.
template <class V, int R, int P>
INVAR_TILE_INLINE void tile_step(V (&acc)[R][P], const V (&wv)[P], const float* xk, int64_t xs) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const V xb = V::bcast(xk[r * xs]);
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) acc[r][p] = V::fma(wv[p], xb, acc[r][p]);
  }
}

// Bytes ahead of the block being read that rows_direct prefetches in each of the 16 rows. The
// hardware prefetchers follow one stream well but not 16 interleaved ones that each end at a
// page boundary (a 1024-float row is one 4 KiB page).
inline constexpr int64_t kDirectPrefetchBytes = 1024;

// Few rows (decode, small batches): R rows × one panel over the whole K straight from the file's
// rows, each 16 × 16 block transposed in registers; the weights are read once per call. Near the
// end of its rows a panel prefetches the start of the next panel's.
template <class V, DType T, int R>
void rows_direct(const DenseView& w, int64_t p, const float* x, float* y) {
  const PanelRows rows = panel_rows(w, p);
  const int64_t K = w.k;
  constexpr int64_t es = T == DType::F32 ? 4 : 2;
  const int64_t next_panel = kPanel * w.row_bytes - w.row_bytes;  // row i + 1 → row i + 16
  V acc[R][1];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r][0] = V::zero();
  int64_t k = 0;
  for (; k + kPanel <= K; k += kPanel) {
    int64_t ahead = k * es + kDirectPrefetchBytes;
    if (ahead >= w.row_bytes) ahead += next_panel;
#pragma GCC unroll 16
    for (int i = 0; i < kPanel; ++i) __builtin_prefetch(rows.row[i] + ahead);
    V t[kPanel];
    block_load<V, T>(rows, k, t);
#pragma GCC unroll 16
    for (int j = 0; j < kPanel; ++j) tile_step<V, R, 1>(acc, {t[j]}, x + k + j, K);
  }
  if (k < K) {
    V t[kPanel];
    block_load_tail<V>(w, rows, k, K - k, t);
    for (int64_t j = 0; j < K - k; ++j) tile_step<V, R, 1>(acc, {t[j]}, x + k + j, K);
  }
  tile_store<V, R, 1>(acc, y + p * kPanel, w.n, w.n - p * kPanel);
}

// Outputs of `rows` (== R) rows over panels [p0, p1).
template <class V, DType T, int R>
void direct_run(const DenseView& w, const float* x, int64_t rows, float* y, int64_t p0,
                int64_t p1) {
  if constexpr (R > 1) {
    if (rows < R) return direct_run<V, T, R - 1>(w, x, rows, y, p0, p1);
  }
  for (int64_t p = p0; p < p1; ++p) rows_direct<V, T, R>(w, p, x, y);
}

// Many rows: one register tile of R rows × P panels over kc steps of F32 weights w (panel i at
// w + i·ws, [kc][16]) and activations x[r·ldx + k]. `accumulate` continues the chains parked in
// y by the previous K-block.
template <class V, int R, int P>
void tile_f32(const float* w, int64_t ws, int64_t kc, const float* x, int64_t ldx, float* y,
              int64_t ldy, int64_t n_valid, bool accumulate) {
  V acc[R][P];
  if (accumulate) {
    tile_load<V, R, P>(acc, y, ldy, n_valid);
  } else {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) acc[r][p] = V::zero();
    }
  }
  for (int64_t k = 0; k < kc; ++k) {
    V wv[P];
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) wv[p] = V::load(w + p * ws + k * kPanel);
    tile_step<V, R, P>(acc, wv, x + k, ldx);
  }
  tile_store<V, R, P>(acc, y, ldy, n_valid);
}

// One M-tile of `rows` (<= R) rows over a group of np (<= P) panels.
template <class V, int R, int P>
void tile_run(int64_t rows, int64_t np, const float* w, int64_t ws, int64_t kc, const float* x,
              int64_t ldx, float* y, int64_t ldy, int64_t n_valid, bool accumulate) {
  if constexpr (R > 1) {
    if (rows < R) {
      return tile_run<V, R - 1, P>(rows, np, w, ws, kc, x, ldx, y, ldy, n_valid, accumulate);
    }
  }
  if (np == P) {
    tile_f32<V, R, P>(w, ws, kc, x, ldx, y, ldy, n_valid, accumulate);
    return;
  }
  for (int64_t i = 0; i < np; ++i) {
    tile_f32<V, R, 1>(w + i * ws, ws, kc, x, ldx, y + i * kPanel, ldy,
                      std::min<int64_t>(kPanel, n_valid - i * kPanel), accumulate);
  }
}

// Panel `p`, steps [k0, k0+kc), as exact F32 into dst[kc][16] (the values the direct path
// computes in registers).
template <class V, DType T>
void panel_pack(const DenseView& w, int64_t p, int64_t k0, int64_t kc, float* dst) {
  const PanelRows rows = panel_rows(w, p);
  int64_t k = k0;
  for (; k + kPanel <= k0 + kc; k += kPanel) {
    V t[kPanel];
    block_load<V, T>(rows, k, t);
#pragma GCC unroll 16
    for (int j = 0; j < kPanel; ++j) V::store(dst + (k - k0 + j) * kPanel, t[j]);
  }
  if (k < k0 + kc) {
    V t[kPanel];
    block_load_tail<V>(w, rows, k, k0 + kc - k, t);
    for (int64_t j = 0; j < k0 + kc - k; ++j) V::store(dst + (k - k0 + j) * kPanel, t[j]);
  }
}

// Many rows: for each K-block and each block of rows (its activations stay in L2), each group of
// P panels (packed to F32 once, kept in L1), each M-tile of R rows. (Packing the activations of a
// tile contiguously measured no faster: the broadcasts are few next to the FMAs.)
// wbuf: kMatmulScratchFloats floats of the calling thread.
template <class V, DType T>
void tiles_run(const DenseView& w, const float* x, int64_t rows, float* y, int64_t p0, int64_t p1,
               float* wbuf) {
  constexpr int R = V::kTileRows, P = V::kTilePanels;
  constexpr int64_t kb = V::kKBlock, mb = V::kMBlock;
  static_assert(mb % R == 0, "row blocks hold whole tiles");
  static_assert(kb % kPanel == 0, "K-blocks hold whole transposed blocks");
  static_assert(P * kb * kPanel <= kMatmulScratchFloats, "packed weights [P][kb][16] fit wbuf");
  for (int64_t k0 = 0; k0 < w.k; k0 += kb) {
    const int64_t kc = std::min(kb, w.k - k0);
    for (int64_t m0 = 0; m0 < rows; m0 += mb) {
      const int64_t mc = std::min(mb, rows - m0);
      for (int64_t g = p0; g < p1; g += P) {
        const int64_t np = std::min<int64_t>(P, p1 - g);
        const int64_t n_valid = std::min<int64_t>(np * kPanel, w.n - g * kPanel);
        for (int64_t i = 0; i < np; ++i) panel_pack<V, T>(w, g + i, k0, kc, wbuf + i * kc * kPanel);
        for (int64_t t0 = 0; t0 < mc; t0 += R) {
          tile_run<V, R, P>(std::min<int64_t>(R, mc - t0), np, wbuf, kc * kPanel, kc,
                            x + (m0 + t0) * w.k + k0, w.k, y + (m0 + t0) * w.n + g * kPanel, w.n,
                            n_valid, k0 > 0);
        }
      }
    }
  }
}

template <class V, DType T>
void panels_run_typed(const DenseView& w, const float* x, int64_t rows, float* y, int64_t p0,
                      int64_t p1, float* wbuf) {
  if (rows <= V::kDirectRows) {
    direct_run<V, T, V::kDirectRows>(w, x, rows, y, p0, p1);
  } else {
    tiles_run<V, T>(w, x, rows, y, p0, p1, wbuf);
  }
}

template <class V>
void panels_run(const DenseView& w, const float* x, int64_t rows, float* y, int64_t p0, int64_t p1,
                float* wbuf) {
  switch (w.type) {
    case DType::F32:
      return panels_run_typed<V, DType::F32>(w, x, rows, y, p0, p1, wbuf);
    case DType::F16:
      return panels_run_typed<V, DType::F16>(w, x, rows, y, p0, p1, wbuf);
    case DType::BF16:
      return panels_run_typed<V, DType::BF16>(w, x, rows, y, p0, p1, wbuf);
    default:
      return;  // quantised weights take qmatmul_tiles.h
  }
}

#undef INVAR_TILE_INLINE

}  // namespace
}  // namespace invar::matmul_tiles
