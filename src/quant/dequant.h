// Scalar dequantisation of every weight type to F32, bit-exact with ggml's dequantize_row_* as its
// C source defines them: each product and difference rounded to F32 on its own (no FMA
// contraction: the project builds with -ffp-contract=off), in the association ggml writes, e.g.
// Q4_K's w = (d·sc)·q − (dmin·m) and Q6_K's w = (d·sc)·q. Formulas per type: quant/blocks.h.
#pragma once

#include <cstdint>

#include "quant/dtype.h"

namespace invar {

// dst[0..n) = the F32 values of the first n elements stored at src in type t. n must be a multiple
// of dtype_block_size(t); src needs no alignment. F32 copies; F16 and BF16 widen exactly.
void dequant_row(DType t, const void* src, float* dst, int64_t n);

}  // namespace invar
