#include "core/dtype.h"

#include <cctype>
#include <string>

#include "core/error.h"

namespace invar {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "f32";
    case DType::F16:
      return "f16";
    case DType::Q8_0:
      return "q8_0";
    case DType::BF16:
      return "bf16";
  }
  return "?";
}

std::optional<DType> dtype_parse(std::string_view s) {
  std::string l(s);
  for (auto& c : l) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (l == "f32") return DType::F32;
  if (l == "f16") return DType::F16;
  if (l == "q8_0") return DType::Q8_0;
  if (l == "bf16") return DType::BF16;
  return std::nullopt;
}

bool dtype_supported(uint32_t id) {
  return id == 0 || id == 1 || id == 8 || id == 30;
}

int64_t dtype_block_size(DType t) {
  return t == DType::Q8_0 ? kQ8Block : 1;
}

int64_t dtype_row_bytes(DType t, int64_t n) {
  switch (t) {
    case DType::F32:
      return 4 * n;
    case DType::F16:
    case DType::BF16:
      return 2 * n;
    case DType::Q8_0:
      return (n / kQ8Block) * kQ8BlockBytes;
  }
  INVAR_CHECK(false, "unknown dtype");
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ff;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        man <<= 1;
        ++e;
      } while ((man & 0x400) == 0);
      u = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | man << 13;
  } else {
    u = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000);
  const uint32_t abs = u & 0x7fffffff;
  if (abs > 0x7f800000) return sign | 0x7e00;   // NaN
  if (abs >= 0x477ff000) return sign | 0x7c00;  // overflow (incl. rounding up) -> inf
  if (abs < 0x38800000) {                       // subnormal or zero in f16
    if (abs < 0x33000000) return sign;          // below half the smallest subnormal
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7fffff) | 0x800000;
    const uint32_t shift = 126 - e;  // 14 + (113 - e) + ...
    uint32_t r = m >> (shift - 0);
    // m is value * 2^(150-e); we want value * 2^24 => shift right by (126 - e)
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return sign | uint16_t(r);
  }
  uint32_t r = abs - 0x38000000;  // rebias exponent 127 -> 15
  uint32_t h = r >> 13;
  const uint32_t rem = r & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
  return sign | uint16_t(h);
}

uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return uint16_t((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1);
  return uint16_t(u >> 16);
}

}  // namespace invar
