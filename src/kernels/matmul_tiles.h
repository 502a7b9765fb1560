// Private to the matmul kernels: the loops shared by the AVX2 and AVX-512 files, written over a
// 16-float vector type V that each file defines with its own intrinsics (vec_avx512.h: one
// __m512; vec_avx2.h: two __m256). V is local to its file, so every instantiation here is too: no
// ODR clash between ISAs.
//
// Every output lane runs the canonical chain acc = fma(w[n][k], x[m][k], acc), k = 0..K-1, from
// acc = +0 (matmul.h). Weights reach the chain as exact F32 values (F16/BF16 widen exactly;
// quantised weights take qmatmul_tiles.h). Tiling in M and N
// only chooses which chains run side by side; K-blocking parks a chain's accumulator in y between
// blocks, which stores and reloads the same float. Hence the bits do not depend on M, on the tile
// shape, on the vector width or on the thread split.
//
// V provides: zero, load, load_n, store, store_n, bcast, fma, mul, from_f16, from_bf16,
// and the tuning constants kTileRows/kTilePanels (register tile of the many-rows path), kKBlock
// and kMBlock (its cache blocks), kDirectRows (up to this many rows the weights are streamed once,
// see rows_direct) and direct_panels<R>().
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/matmul_packed.h"

namespace invar::matmul_tiles {
namespace {  // internal linkage: each ISA file gets its own copy

#define INVAR_TILE_INLINE inline __attribute__((always_inline))

// Weights w[n0..n0+15][k] of a panel as exact F32.
template <class V, DType T>
INVAR_TILE_INLINE V weights_at(const uint8_t* panel, int64_t k) {
  if constexpr (T == DType::F32) {
    return V::load(reinterpret_cast<const float*>(panel) + k * kPanel);
  } else if constexpr (T == DType::F16) {
    return V::from_f16(reinterpret_cast<const uint16_t*>(panel) + k * kPanel);
  } else {
    static_assert(T == DType::BF16);
    return V::from_bf16(reinterpret_cast<const uint16_t*>(panel) + k * kPanel);
  }
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

// Few rows (decode, small batches): R rows × P panels over the whole K straight from the packed
// weights, converting each weight vector in registers; the weights are read once per call.
template <class V, DType T, int R, int P>
void rows_direct(const MatmulPacked& w, int64_t p0, const float* x, int64_t ldx, float* y,
                 int64_t ldy, int64_t n_valid) {
  const uint8_t* pan[P];
  for (int p = 0; p < P; ++p) pan[p] = w.panel(p0 + p);
  V acc[R][P];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) acc[r][p] = V::zero();
  }
  for (int64_t k = 0; k < w.k; ++k) {
    V wv[P];
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) wv[p] = weights_at<V, T>(pan[p], k);
    tile_step<V, R, P>(acc, wv, x + k, ldx);
  }
  tile_store<V, R, P>(acc, y, ldy, n_valid);
}

// Outputs of `rows` (== R) rows over panels [p0, p1): groups of P panels, then single panels.
template <class V, DType T, int R>
void direct_run(const MatmulPacked& w, const float* x, int64_t rows, float* y, int64_t p0,
                int64_t p1) {
  if constexpr (R > 1) {
    if (rows < R) return direct_run<V, T, R - 1>(w, x, rows, y, p0, p1);
  }
  constexpr int P = V::template direct_panels<R>();
  int64_t p = p0;
  for (; p + P <= p1; p += P) {
    const int64_t n_valid = std::min<int64_t>(P * kPanel, w.n - p * kPanel);
    rows_direct<V, T, R, P>(w, p, x, w.k, y + p * kPanel, w.n, n_valid);
  }
  for (; p < p1; ++p) {
    const int64_t n_valid = std::min<int64_t>(kPanel, w.n - p * kPanel);
    rows_direct<V, T, R, 1>(w, p, x, w.k, y + p * kPanel, w.n, n_valid);
  }
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

// Panel `p`, steps [k0, k0+kc), widened to F32 into dst[kc][16] (the exact values the direct path
// computes in registers).
template <class V, DType T>
void panel_to_f32(const MatmulPacked& w, int64_t p, int64_t k0, int64_t kc, float* dst) {
  const uint8_t* pan = w.panel(p);
  for (int64_t k = k0; k < k0 + kc; ++k) {
    V::store(dst + (k - k0) * kPanel, weights_at<V, T>(pan, k));
  }
}

// Many rows: for each K-block and each block of rows (its activations stay in L2), each group of
// P panels (widened to F32 once, kept in L1), each M-tile of R rows. (Packing the activations of a
// tile contiguously measured no faster: the broadcasts are few next to the FMAs.)
// wbuf: kMatmulScratchFloats floats of the calling thread (unused for F32 weights).
template <class V, DType T>
void tiles_run(const MatmulPacked& w, const float* x, int64_t rows, float* y, int64_t p0,
               int64_t p1, float* wbuf) {
  constexpr int R = V::kTileRows, P = V::kTilePanels;
  constexpr int64_t kb = V::kKBlock, mb = V::kMBlock;
  static_assert(mb % R == 0, "row blocks hold whole tiles");
  static_assert(P * kb * kPanel <= kMatmulScratchFloats, "widened weights [P][kb][16] fit wbuf");
  for (int64_t k0 = 0; k0 < w.k; k0 += kb) {
    const int64_t kc = std::min(kb, w.k - k0);
    for (int64_t m0 = 0; m0 < rows; m0 += mb) {
      const int64_t mc = std::min(mb, rows - m0);
      for (int64_t g = p0; g < p1; g += P) {
        const int64_t np = std::min<int64_t>(P, p1 - g);
        const int64_t n_valid = std::min<int64_t>(np * kPanel, w.n - g * kPanel);
        const float* wf;
        int64_t ws;
        if constexpr (T == DType::F32) {
          wf = reinterpret_cast<const float*>(w.panel(g)) + k0 * kPanel;
          ws = w.panel_bytes / int64_t(sizeof(float));
        } else {
          for (int64_t i = 0; i < np; ++i) {
            panel_to_f32<V, T>(w, g + i, k0, kc, wbuf + i * kc * kPanel);
          }
          wf = wbuf;
          ws = kc * kPanel;
        }
        for (int64_t t0 = 0; t0 < mc; t0 += R) {
          tile_run<V, R, P>(std::min<int64_t>(R, mc - t0), np, wf, ws, kc, x + (m0 + t0) * w.k + k0,
                            w.k, y + (m0 + t0) * w.n + g * kPanel, w.n, n_valid, k0 > 0);
        }
      }
    }
  }
}

template <class V, DType T>
void panels_run_typed(const MatmulPacked& w, const float* x, int64_t rows, float* y, int64_t p0,
                      int64_t p1, float* wbuf) {
  if (rows <= V::kDirectRows) {
    direct_run<V, T, V::kDirectRows>(w, x, rows, y, p0, p1);
  } else {
    tiles_run<V, T>(w, x, rows, y, p0, p1, wbuf);
  }
}

template <class V>
void panels_run(const MatmulPacked& w, const float* x, int64_t rows, float* y, int64_t p0,
                int64_t p1, float* wbuf) {
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
