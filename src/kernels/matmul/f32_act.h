// Private to the matmul kernels: the product with weights of every type (F32, F16, BF16 and every
// block-quantised type), read in place from the file (no packed or F32 copy of the weights).
//
// Canonical order (rule N1, docs/numerics.md): with w[n][k] the exact F32 value of the weight
// (dequant_row's; F16 and BF16 widen exactly), lane l (0..15) of output (m, n) accumulates
// k = l, l+16, l+32, … in ascending order,
//     acc[l] = +0;  acc[l] = fma(w[n][k], x[m][k], acc[l])
// and y[m][n] is the fixed 16-lane tree of reduce.h over acc. K is a multiple of 32 for every
// quantised type, so each lane sees exactly K/16 terms; F32/F16/BF16 allow any K (lanes past the
// last k see fewer terms). A 16-lane vector holds one output's lanes, so a row of weights is
// consumed 16 consecutive weights at a time, the order in which the file stores them: decode
// streams rows and dequantises them in registers (f32_act_unpack.h, f32_act_dense.h); prefill
// dequantises a few rows into a per-thread buffer and runs a register tile over it.
#pragma once

#include <algorithm>
#include <cstdint>

#include "quant/dtype.h"

namespace invar {

// A {K, N} matrix of any type as stored: N rows of row_bytes.
struct QuantView {
  DType type;
  const uint8_t* data;
  int64_t k, n, row_bytes;
};

// Prefill (f32_act_prefill.h), per thread: a group of weight rows × a K-chunk, dequantised
// (kQPanelWeights floats, 24 KiB: stays in the 48 KiB L1 with one tile's activations while every
// tile of a row block runs over it); the parked lane accumulators of up to kQMBlockMax activation
// rows × kQGroupRowsMax outputs between K-chunks; and the packed activations of one row block, at
// most kQPanelFloats (kept in L2 while every group of outputs streams them). The group sizes are
// multiples of every ISA's kQTileCols (3, 6); a chunk holds whole blocks of every type (256).
inline constexpr int64_t kQPanelWeights = 6144;
inline constexpr int64_t kQGroupRowsMax = 12;
inline constexpr int64_t kQGroupRowsLargeK = 6;
inline constexpr int64_t kQMBlockMin = 32;
inline constexpr int64_t kQMBlockMax = 256;
// 768 KiB of a 1 MiB L2: each weight is dequantised once per row block, so larger blocks
// dequantise less (K = 4096: 48-row blocks instead of 32, 2-4% faster; an expert's 160 × 2048
// activations: 2 blocks instead of 3, ~2%; 224 Ki floats measured the same as 192). The most
// the scratch holds; a smaller L2 gets 3/4 of its size (qprefill_panel_floats).
inline constexpr int64_t kQPanelFloats = 192 * 1024;
// The packed-activation budget of this CPU: 3/4 of its per-core L2 (AMD Zen 3: 512 KiB, so 96 Ki
// floats), at most kQPanelFloats, kQPanelFloats where the size is unknown. It changes how rows
// are blocked, never a bit.
int64_t qprefill_panel_floats();
inline constexpr int64_t kQScratchFloats =
    kQPanelWeights + kQMBlockMax * kQGroupRowsMax * 16 + kQPanelFloats + 3 * 16;

// How the prefill path cuts the product of `rows` activation rows with K weights per output, for
// a register tile of `tile_rows` rows. None of it changes a bit; tests use it to show that their
// shapes reach every case.
struct QPrefillPlan {
  int64_t group_rows;  // weight rows dequantised together: kQGroupRowsMax when K fits one chunk
                       // (nothing is parked), else kQGroupRowsLargeK (longer chunks, fewer parks)
  int64_t k_chunk;     // weights per row and chunk: kQPanelWeights / group_rows
  int64_t block_rows;  // activation rows per row block (the last block takes the rest): about
                       // panel_floats / K, a multiple of tile_rows, in [kQMBlockMin, kQMBlockMax];
                       // each weight is dequantised once per row block
  bool packed;         // block_rows × K fit panel_floats: activations packed, else read in place
};
inline QPrefillPlan qprefill_plan(int64_t rows, int64_t k, int64_t tile_rows,
                                  int64_t panel_floats = kQPanelFloats) {
  QPrefillPlan p;
  p.group_rows = k * kQGroupRowsMax <= kQPanelWeights ? kQGroupRowsMax : kQGroupRowsLargeK;
  p.k_chunk = kQPanelWeights / p.group_rows;
  // Blocks of equal size (a multiple of the tile's rows), as few as the size limit allows.
  const int64_t most =
      std::clamp(panel_floats / k, kQMBlockMin, kQMBlockMax) / tile_rows * tile_rows;
  const int64_t n_blocks = (rows + most - 1) / most;
  p.block_rows = ((rows + n_blocks - 1) / n_blocks + tile_rows - 1) / tile_rows * tile_rows;
  p.packed = p.block_rows * k <= panel_floats;
  return p;
}

// The scalar reference: outputs [n0, n1) of every row of x[m][K] into y[m][N].
void qmatmul_ref_range(const QuantView& w, const float* x, int64_t m, float* y, int64_t n0,
                       int64_t n1);

}  // namespace invar
