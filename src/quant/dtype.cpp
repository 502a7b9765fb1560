#include "quant/dtype.h"

#include <cctype>
#include <string>

#include "core/error.h"

namespace invar {

namespace {

struct Traits {
  DType type;
  std::string_view name;
  int64_t block_size;
  int64_t block_bytes;
};

// Geometry as ggml-common.h defines it (block structs: quant/blocks.h).
constexpr Traits kTraits[] = {
    {DType::F32, "f32", 1, 4},
    {DType::F16, "f16", 1, 2},
    {DType::Q4_0, "q4_0", 32, 18},
    {DType::Q4_1, "q4_1", 32, 20},
    {DType::Q5_0, "q5_0", 32, 22},
    {DType::Q5_1, "q5_1", 32, 24},
    {DType::Q8_0, "q8_0", 32, 34},
    {DType::Q2_K, "q2_K", 256, 84},
    {DType::Q3_K, "q3_K", 256, 110},
    {DType::Q4_K, "q4_K", 256, 144},
    {DType::Q5_K, "q5_K", 256, 176},
    {DType::Q6_K, "q6_K", 256, 210},
    {DType::IQ2_XXS, "iq2_xxs", 256, 66},
    {DType::IQ2_XS, "iq2_xs", 256, 74},
    {DType::IQ3_XXS, "iq3_xxs", 256, 98},
    {DType::IQ1_S, "iq1_s", 256, 50},
    {DType::IQ4_NL, "iq4_nl", 32, 18},
    {DType::IQ3_S, "iq3_s", 256, 110},
    {DType::IQ2_S, "iq2_s", 256, 82},
    {DType::IQ4_XS, "iq4_xs", 256, 136},
    {DType::IQ1_M, "iq1_m", 256, 56},
    {DType::BF16, "bf16", 1, 2},
    {DType::TQ1_0, "tq1_0", 256, 54},
    {DType::TQ2_0, "tq2_0", 256, 66},
    {DType::MXFP4, "mxfp4", 32, 17},
};

const Traits* traits_of(uint32_t id) {
  for (const Traits& t : kTraits)
    if (uint32_t(t.type) == id) return &t;
  return nullptr;
}

const Traits& traits(DType t) {
  const Traits* tr = traits_of(uint32_t(t));
  INVAR_CHECK(tr != nullptr, "unknown dtype " + std::to_string(uint32_t(t)));
  return *tr;
}

}  // namespace

std::string_view dtype_name(DType t) {
  const Traits* tr = traits_of(uint32_t(t));
  return tr ? tr->name : "?";
}

std::optional<DType> dtype_parse(std::string_view s) {
  std::string l(s);
  for (auto& c : l) c = char(std::tolower(static_cast<unsigned char>(c)));
  for (const Traits& t : kTraits) {
    std::string n(t.name);
    for (auto& c : n) c = char(std::tolower(static_cast<unsigned char>(c)));
    if (n == l) return t.type;
  }
  return std::nullopt;
}

bool dtype_supported(uint32_t id) {
  return traits_of(id) != nullptr;
}

std::string dtype_supported_list() {
  std::string s;
  for (const Traits& t : kTraits) s += (s.empty() ? "" : ", ") + std::string(t.name);
  return s;
}

int64_t dtype_block_size(DType t) {
  return traits(t).block_size;
}

int64_t dtype_block_bytes(DType t) {
  return traits(t).block_bytes;
}

bool dtype_is_quantized(DType t) {
  return t != DType::F32 && t != DType::F16 && t != DType::BF16;
}

int64_t dtype_row_bytes(DType t, int64_t n) {
  const Traits& tr = traits(t);
  return n / tr.block_size * tr.block_bytes;
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
