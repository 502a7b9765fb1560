// Quantisers for every weight type: F32 rows to ggml's block layouts (quant/blocks.h), so
// invar can write the files users download. Round-to-nearest (the lattice types: nearest grid
// point) with a least-squares scale/min fit per (sub-)block; not llama-quantize's search (no
// importance matrix), so the bits differ from llama-quantize's, but dequant_row() of the result is
// what any GGUF reader computes.
#pragma once

#include <cstdint>
#include <string>

#include "quant/dtype.h"

namespace invar {

// dst (dtype_row_bytes(t, n) bytes) = src[0..n) in type t. n must be a multiple of
// dtype_block_size(t). Non-finite inputs are not supported (the caller's weights are finite).
void quantize_row(DType t, const float* src, void* dst, int64_t n);
// "f32, f16, q4_0, ..." (the types quantize_row writes: every type), for error messages.
std::string quantize_supported_list();

}  // namespace invar
