// Element types of tensors, numbered exactly as ggml's `enum ggml_type` so GGUF type ids map 1:1.
// Block layouts of the quantised types: quant/blocks.h; their dequantisation: quant/dequant.h.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace invar {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

// Every type invar computes with, in ggml id order.
inline constexpr DType kAllDTypes[] = {
    DType::F32,   DType::F16,    DType::Q4_0,    DType::Q4_1,   DType::Q5_0,
    DType::Q5_1,  DType::Q8_0,   DType::Q2_K,    DType::Q3_K,   DType::Q4_K,
    DType::Q5_K,  DType::Q6_K,   DType::IQ2_XXS, DType::IQ2_XS, DType::IQ3_XXS,
    DType::IQ1_S, DType::IQ4_NL, DType::IQ3_S,   DType::IQ2_S,  DType::IQ4_XS,
    DType::IQ1_M, DType::BF16,   DType::TQ1_0,   DType::TQ2_0,  DType::MXFP4,
};

// Q8_0: blocks of 32 weights = one F16 scale d, then 32 int8 q; w = d * q.
inline constexpr int64_t kQ8Block = 32;
inline constexpr int64_t kQ8BlockBytes = 2 + 32;

// Name as ggml prints it ("f32", "f16", "q4_K", "iq4_xs", "bf16").
std::string_view dtype_name(DType t);
// Parses a name, case-insensitively ("q4_k", "Q4_K", "f32"); nullopt if unknown.
std::optional<DType> dtype_parse(std::string_view s);
// True for the ids invar can compute with.
bool dtype_supported(uint32_t ggml_type_id);
// "f32, f16, bf16, q4_0, ..." for error messages.
std::string dtype_supported_list();
// Elements per block: 1 (F32/F16/BF16), 32 (legacy quants, IQ4_NL, MXFP4) or 256 (K-quants and
// the other IQ and TQ types).
int64_t dtype_block_size(DType t);
// Bytes of one block.
int64_t dtype_block_bytes(DType t);
// True for the block-quantised types (everything but F32/F16/BF16).
bool dtype_is_quantized(DType t);
// Bytes of one row of n elements (n must be a multiple of the block size).
int64_t dtype_row_bytes(DType t, int64_t n);

// IEEE binary16 <-> binary32, exact (round to nearest even on narrowing), no hardware needed.
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// bfloat16 <-> binary32 (round to nearest even on narrowing; NaN stays NaN).
inline float bf16_to_f32(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t f32_to_bf16(float f);

}  // namespace invar
