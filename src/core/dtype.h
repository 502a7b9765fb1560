// Element types of tensors, numbered exactly as ggml's `enum ggml_type` so GGUF type ids map 1:1.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace invar {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q8_0 = 8,
  BF16 = 30,
};

// Q8_0: blocks of 32 weights = one F16 scale d, then 32 int8 q; w = d * q.
inline constexpr int64_t kQ8Block = 32;
inline constexpr int64_t kQ8BlockBytes = 2 + 32;

// Name as ggml prints it ("f32", "f16", "q8_0", "bf16").
std::string_view dtype_name(DType t);
// Parses "f32"/"F32" etc.; nullopt if unknown.
std::optional<DType> dtype_parse(std::string_view s);
// True for the ids invar can compute with.
bool dtype_supported(uint32_t ggml_type_id);
// Bytes of one row of n elements (n must be a multiple of the block size for Q8_0).
int64_t dtype_row_bytes(DType t, int64_t n);
// Elements per block (1 for F32/F16/BF16, 32 for Q8_0).
int64_t dtype_block_size(DType t);

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
