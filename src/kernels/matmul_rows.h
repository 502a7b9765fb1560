// Private to the matmul kernels: an F32/F16/BF16 weight matrix as its per-ISA entry point
// (IsaKernels::matmul_rows, kernels_isa.h) reads it, in place in the file's row-major layout,
// and the scratch that entry point needs.
//
// The SIMD paths run 16 output chains side by side, one per lane, so they need the weights
// w[n0..n0+15][k] of a panel of 16 consecutive rows in one vector. The file stores rows, so the
// kernels load a 16 × 16 block (16 rows × 16 steps of k) and transpose it in registers:
//   few rows (decode): straight into the FMAs, the weights read once from the mapping;
//   many rows (prefill): into a per-thread panel buffer [kc][16] of F32 (the caller's scratch,
//     cache resident), reused by every activation row of a row block.
// No copy of a matrix exists beyond that buffer.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace invar {

inline constexpr int64_t kPanel = 16;

// N rows of K weights of one type, row r at data + r·row_bytes (not owned).
struct DenseView {
  DType type = DType::F32;
  const uint8_t* data = nullptr;
  int64_t k = 0, n = 0;
  int64_t row_bytes = 0;

  int64_t n_panels() const { return (n + kPanel - 1) / kPanel; }
};

// Floats of the buffer a matmul thread packs its weight panels into (the many-rows path): the
// largest tile group of any ISA, kTilePanels × kKBlock × kPanel.
inline constexpr int64_t kMatmulScratchFloats = 2 * 256 * kPanel;

}  // namespace invar
