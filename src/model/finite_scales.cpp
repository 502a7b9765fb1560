// Block-scale check at load (finite_scales.h).
#include "model/finite_scales.h"

#include <cmath>
#include <cstddef>
#include <cstring>

#include "quant/blocks.h"

namespace invar {
namespace {

// ThreadSanitizer does not watch this scan (CI time: it was 6% of the TSan suite's CPU, every
// model load reading each F32 element of the test models through TSan's hooks). It reads the
// read-only mapping on the loading thread, before any other thread can see the model. The helpers
// carry the attribute too: GCC inlines only between functions with the same sanitizer settings.
#define INVAR_TSAN_UNWATCHED __attribute__((no_sanitize("thread")))

// An F16 with every exponent bit set is ±Inf or NaN.
INVAR_TSAN_UNWATCHED bool f16_nonfinite(uint16_t h) {
  return (h & 0x7C00) == 0x7C00;
}
INVAR_TSAN_UNWATCHED bool bf16_nonfinite(uint16_t h) {
  return (h & 0x7F80) == 0x7F80;
}

INVAR_TSAN_UNWATCHED uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// The name of the F16 field at `offset` of a block of type t: the first is the scale d, the
// second the min (m for the legacy types, dmin for the K-quants).
const char* field_name(DType t, size_t index) {
  if (index == 0) return "d";
  return dtype_block_size(t) == 256 ? "dmin" : "m";
}

}  // namespace

INVAR_TSAN_UNWATCHED std::optional<NonFiniteScale> first_nonfinite_scale(const GgufTensorInfo& t) {
  const uint8_t* p = t.data;
  const int64_t n = t.n_elements();
  switch (t.type) {
    case DType::F32:
      for (int64_t i = 0; i < n; ++i) {
        float v;
        std::memcpy(&v, p + 4 * i, 4);
        if (!std::isfinite(v)) return NonFiniteScale{t.name, i, "value", v};
      }
      return std::nullopt;
    case DType::F16:
    case DType::BF16: {
      const bool f16 = t.type == DType::F16;
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = load_u16(p + 2 * i);
        if (f16 ? f16_nonfinite(h) : bf16_nonfinite(h))
          return NonFiniteScale{t.name, i, "value", f16 ? f16_to_f32(h) : bf16_to_f32(h)};
      }
      return std::nullopt;
    }
    default:
      break;
  }
  const std::vector<size_t> offsets = quant_f16_offsets(t.type);
  const int64_t block_bytes = dtype_block_bytes(t.type);
  const int64_t blocks = n / dtype_block_size(t.type);
  if (t.type == DType::IQ1_M) {  // d is spread over the top nibbles of the scales
    for (int64_t b = 0; b < blocks; ++b) {
      const uint16_t h = iq1m_scale_bits(p + b * block_bytes);
      if (f16_nonfinite(h)) return NonFiniteScale{t.name, b, "d", f16_to_f32(h)};
    }
    return std::nullopt;
  }
  if (t.type == DType::MXFP4) {
    // E8M0 255 is NaN in the OCP format; ggml reads it as 2^127, and a weight 12 · 2^127 is +Inf.
    for (int64_t b = 0; b < blocks; ++b)
      if (p[b * block_bytes + offsetof(BlockMXFP4, e)] == 0xff)
        return NonFiniteScale{t.name, b, "e", std::nanf("")};
    return std::nullopt;
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = p + b * block_bytes;
    for (size_t j = 0; j < offsets.size(); ++j) {
      const uint16_t h = load_u16(blk + offsets[j]);
      if (f16_nonfinite(h)) return NonFiniteScale{t.name, b, field_name(t.type, j), f16_to_f32(h)};
    }
  }
  return std::nullopt;
}

void check_finite_scales(const GgufFile& f) {
  for (const GgufTensorInfo& t : f.tensors()) {
    const auto bad = first_nonfinite_scale(t);
    if (!bad) continue;
    const char* what = bad->field == "value" ? "element " : "block ";
    throw GgufError("gguf: tensor '" + bad->tensor + "' (" + std::string(dtype_name(t.type)) +
                    ") " + what + std::to_string(bad->block) + ": " +
                    (bad->field == "value" ? std::string("value") : "scale " + bad->field) +
                    " is " +
                    (std::isnan(bad->value) ? "NaN"
                     : bad->value > 0       ? "+Inf"
                                            : "-Inf") +
                    "; the file is damaged (every weight scaled by it would be NaN): "
                    "re-download or re-quantise it");
  }
}

}  // namespace invar

#undef INVAR_TSAN_UNWATCHED
