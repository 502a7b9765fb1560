// Per-type dequantisation loops (formulas and layouts: quant/blocks.h). Every line computes
// one F32 operation at a time in ggml's association, so each intermediate is rounded exactly where
// ggml's reference C rounds it.
#include "quant/dequant.h"

#include <cstring>
#include <string>

#include "core/error.h"
#include "quant/blocks.h"
#include "quant/iq_grids.h"

namespace invar {
namespace {

template <class B>
B block_at(const uint8_t* src, int64_t i) {
  B b;
  std::memcpy(&b, src + i * int64_t(sizeof(B)), sizeof(B));
  return b;
}

void dq_q4_0(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const auto b = block_at<BlockQ4_0>(src, i);
    const float d = f16_to_f32(b.d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = float((b.qs[j] & 0xF) - 8) * d;
      y[j + kQK / 2] = float((b.qs[j] >> 4) - 8) * d;
    }
  }
}

void dq_q4_1(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const auto b = block_at<BlockQ4_1>(src, i);
    const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
    for (int j = 0; j < kQK / 2; ++j) {
      const float p0 = float(b.qs[j] & 0xF) * d;
      const float p1 = float(b.qs[j] >> 4) * d;
      y[j] = p0 + m;
      y[j + kQK / 2] = p1 + m;
    }
  }
}

// The 5-bit quants of a Q5_0 / Q5_1 block: nibble plus bit j (low) or j + 16 (high) of qh.
void q5_quants(const uint8_t* qs, const uint8_t* qh_bytes, int (&q)[kQK]) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  for (int j = 0; j < kQK / 2; ++j) {
    q[j] = (qs[j] & 0xF) | int(((qh >> j) << 4) & 0x10);
    q[j + kQK / 2] = (qs[j] >> 4) | int((qh >> (j + 12)) & 0x10);
  }
}

void dq_q5_0(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const auto b = block_at<BlockQ5_0>(src, i);
    const float d = f16_to_f32(b.d);
    int q[kQK];
    q5_quants(b.qs, b.qh, q);
    for (int j = 0; j < kQK; ++j) y[j] = float(q[j] - 16) * d;
  }
}

void dq_q5_1(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const auto b = block_at<BlockQ5_1>(src, i);
    const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
    int q[kQK];
    q5_quants(b.qs, b.qh, q);
    for (int j = 0; j < kQK; ++j) {
      const float p = float(q[j]) * d;
      y[j] = p + m;
    }
  }
}

void dq_q8_0(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const auto b = block_at<BlockQ8_0>(src, i);
    const float d = f16_to_f32(b.d);
    for (int j = 0; j < kQK; ++j) y[j] = float(b.qs[j]) * d;
  }
}

void dq_q2_k(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = block_at<BlockQ2_K>(src, i);
    const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
    int is = 0;
    for (int half = 0; half < 2; ++half) {
      const uint8_t* q = b.qs + 32 * half;
      for (int shift = 0; shift < 8; shift += 2) {
        for (int part = 0; part < 2; ++part, ++is) {
          const uint8_t sc = b.scales[is];
          const float dl = d * float(sc & 0xF);
          const float ml = dmin * float(sc >> 4);
          for (int l = 0; l < 16; ++l) {
            const float p = dl * float((q[l + 16 * part] >> shift) & 3);
            *y++ = p - ml;
          }
        }
      }
    }
  }
}

// The 16 scales (0..63, stored offset by 32) of a Q3_K block from its 12 packed bytes: scale i
// (i < 4) is the low nibble of byte i, 4 + i the low nibble of byte 4 + i, 8 + i the high nibble
// of byte i, 12 + i the high nibble of byte 4 + i; bits 4-5 come from byte 8 + i, two bits per
// group of four in that order.
void q3_scales(const uint8_t* p, int (&sc)[16]) {
  for (int i = 0; i < 4; ++i) {
    const int hi = p[8 + i];
    sc[i] = (p[i] & 0xF) | ((hi & 3) << 4);
    sc[4 + i] = (p[4 + i] & 0xF) | (((hi >> 2) & 3) << 4);
    sc[8 + i] = (p[i] >> 4) | (((hi >> 4) & 3) << 4);
    sc[12 + i] = (p[4 + i] >> 4) | (((hi >> 6) & 3) << 4);
  }
}

void dq_q3_k(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = block_at<BlockQ3_K>(src, i);
    const float d = f16_to_f32(b.d);
    int sc[16];
    q3_scales(b.scales, sc);
    int is = 0, bit = 0;
    for (int half = 0; half < 2; ++half) {
      const uint8_t* q = b.qs + 32 * half;
      for (int shift = 0; shift < 8; shift += 2, ++bit) {
        for (int part = 0; part < 2; ++part, ++is) {
          const float dl = d * float(sc[is] - 32);
          for (int l = 0; l < 16; ++l) {
            const int k = l + 16 * part;
            const int v = ((q[k] >> shift) & 3) - ((b.hmask[k] >> bit) & 1 ? 0 : 4);
            *y++ = dl * float(v);
          }
        }
      }
    }
  }
}

// Q4_K and Q5_K: per 64 elements, sub-blocks 2j (low nibbles) and 2j + 1 (high nibbles) of
// qs[32j .. 32j + 32), plus 16 from bits 2j / 2j + 1 of qh for Q5_K.
template <class B, bool kFifthBit>
void dq_q45_k(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = block_at<B>(src, i);
    const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
    for (int j = 0; j < 4; ++j) {
      const uint8_t* q = b.qs + 32 * j;
      for (int part = 0; part < 2; ++part) {
        uint8_t sc, m;
        k4_scale_min(2 * j + part, b.scales, sc, m);
        const float dl = d * float(sc);
        const float ml = dmin * float(m);
        for (int l = 0; l < 32; ++l) {
          int v = part == 0 ? q[l] & 0xF : q[l] >> 4;
          if constexpr (kFifthBit) v += (b.qh[l] >> (2 * j + part)) & 1 ? 16 : 0;
          const float p = dl * float(v);
          *y++ = p - ml;
        }
      }
    }
  }
}

void dq_q6_k(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    const auto b = block_at<BlockQ6_K>(src, i);
    const float d = f16_to_f32(b.d);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = b.ql + 64 * half;
      const uint8_t* qh = b.qh + 32 * half;
      const int8_t* sc = b.scales + 8 * half;
      float* out = y + 128 * half;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q[4] = {
            ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32,
            ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32,
            ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32,
            ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32,
        };
        for (int g = 0; g < 4; ++g) {
          const float ds = d * float(sc[is + 2 * g]);
          out[l + 32 * g] = ds * float(q[g]);
        }
      }
    }
  }
}

void dq_iq4_nl(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const auto b = block_at<BlockIQ4_NL>(src, i);
    const float d = f16_to_f32(b.d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = d * float(kIQ4NLValues[b.qs[j] & 0xF]);
      y[j + kQK / 2] = d * float(kIQ4NLValues[b.qs[j] >> 4]);
    }
  }
}

void dq_iq4_xs(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = block_at<BlockIQ4_XS>(src, i);
    const float d = f16_to_f32(b.d);
    for (int ib = 0; ib < kQK_K / 32; ++ib, y += 32) {
      const int ls =
          ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b.scales_h >> (2 * ib)) & 3) << 4);
      const float dl = d * float(ls - 32);
      const uint8_t* qs = b.qs + 16 * ib;
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * float(kIQ4NLValues[qs[j] & 0xF]);
        y[j + 16] = dl * float(kIQ4NLValues[qs[j] >> 4]);
      }
    }
  }
}

// The low-bit types below multiply as ggml writes it: y = db · grid[j] · (±1) evaluates
// (db · grid) first and then the sign, each rounded (all exact: db has at most 16 significant bits,
// a grid magnitude at most 6).

// Byte j of a little-endian u64 / u32 grid entry.
uint8_t grid_byte(uint64_t entry, int j) {
  return uint8_t(entry >> (8 * j));
}
float sign_of(uint8_t signs, int j) {
  return (signs >> j) & 1 ? -1.0f : 1.0f;
}

void dq_iq2_xxs(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = block_at<BlockIQ2_XXS>(src, i);
    const float d = f16_to_f32(b.d);
    for (int ib = 0; ib < 8; ++ib) {
      uint32_t aux[2];
      std::memcpy(aux, b.qs + 4 * ib, 8);
      const float db = d * (0.5f + float(aux[1] >> 28)) * 0.25f;
      for (int l = 0; l < 4; ++l, y += 8) {
        const uint64_t g = kIQ2XXSGrid[(aux[0] >> (8 * l)) & 0xff];
        const uint8_t signs = kIQ2SignsTable[(aux[1] >> (7 * l)) & 127];
        for (int j = 0; j < 8; ++j) y[j] = db * float(grid_byte(g, j)) * sign_of(signs, j);
      }
    }
  }
}

void dq_iq2_xs(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = block_at<BlockIQ2_XS>(src, i);
    const float d = f16_to_f32(b.d);
    for (int ib = 0; ib < 8; ++ib) {
      const float db[2] = {d * (0.5f + float(b.scales[ib] & 0xf)) * 0.25f,
                           d * (0.5f + float(b.scales[ib] >> 4)) * 0.25f};
      for (int l = 0; l < 4; ++l, y += 8) {
        const uint16_t q = b.qs[4 * ib + l];
        const uint64_t g = kIQ2XSGrid[q & 511];
        const uint8_t signs = kIQ2SignsTable[q >> 9];
        for (int j = 0; j < 8; ++j) y[j] = db[l / 2] * float(grid_byte(g, j)) * sign_of(signs, j);
      }
    }
  }
}

void dq_iq2_s(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = block_at<BlockIQ2_S>(src, i);
    const float d = f16_to_f32(b.d);
    for (int ib = 0; ib < 8; ++ib) {
      const float db[2] = {d * (0.5f + float(b.scales[ib] & 0xf)) * 0.25f,
                           d * (0.5f + float(b.scales[ib] >> 4)) * 0.25f};
      for (int l = 0; l < 4; ++l, y += 8) {
        const int idx = b.qs[4 * ib + l] | ((b.qh[ib] << (8 - 2 * l)) & 0x300);
        const uint64_t g = kIQ2SGrid[idx];
        const uint8_t signs = b.qs[32 + 4 * ib + l];
        for (int j = 0; j < 8; ++j) y[j] = db[l / 2] * float(grid_byte(g, j)) * sign_of(signs, j);
      }
    }
  }
}

void dq_iq3_xxs(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = block_at<BlockIQ3_XXS>(src, i);
    const float d = f16_to_f32(b.d);
    for (int ib = 0; ib < 8; ++ib) {
      uint32_t aux;
      std::memcpy(&aux, b.qs + 64 + 4 * ib, 4);
      const float db = d * (0.5f + float(aux >> 28)) * 0.5f;
      for (int l = 0; l < 4; ++l, y += 8) {
        const uint8_t signs = kIQ2SignsTable[(aux >> (7 * l)) & 127];
        const uint32_t g1 = kIQ3XXSGrid[b.qs[8 * ib + 2 * l]];
        const uint32_t g2 = kIQ3XXSGrid[b.qs[8 * ib + 2 * l + 1]];
        for (int j = 0; j < 4; ++j) {
          y[j] = db * float(grid_byte(g1, j)) * sign_of(signs, j);
          y[j + 4] = db * float(grid_byte(g2, j)) * sign_of(signs, j + 4);
        }
      }
    }
  }
}

void dq_iq3_s(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = block_at<BlockIQ3_S>(src, i);
    const float d = f16_to_f32(b.d);
    for (int ib = 0; ib < 8; ++ib) {
      const float db = d * float(1 + 2 * ((b.scales[ib / 2] >> (4 * (ib % 2))) & 0xf));
      const uint8_t* qs = b.qs + 8 * ib;
      const int qh = b.qh[ib];
      for (int l = 0; l < 4; ++l, y += 8) {
        const uint32_t g1 = kIQ3SGrid[qs[2 * l] | ((qh << (8 - 2 * l)) & 256)];
        const uint32_t g2 = kIQ3SGrid[qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256)];
        const uint8_t signs = b.signs[4 * ib + l];
        for (int j = 0; j < 4; ++j) {
          y[j] = db * float(grid_byte(g1, j)) * sign_of(signs, j);
          y[j + 4] = db * float(grid_byte(g2, j)) * sign_of(signs, j + 4);
        }
      }
    }
  }
}

// IQ1_S / IQ1_M: y = dl · (grid + δ), the sum exact (a multiple of 1/8 below 2).
void iq1_group(float dl, uint64_t g, float delta, float* y) {
  for (int j = 0; j < 8; ++j) y[j] = dl * (float(int8_t(grid_byte(g, j))) + delta);
}

constexpr float kIQ1Delta = 0.125f;

void dq_iq1_s(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = block_at<BlockIQ1_S>(src, i);
    const float d = f16_to_f32(b.d);
    for (int ib = 0; ib < 8; ++ib) {
      const int qh = b.qh[ib];
      const float dl = d * float(2 * ((qh >> 12) & 7) + 1);
      const float delta = qh & 0x8000 ? -kIQ1Delta : kIQ1Delta;
      for (int l = 0; l < 4; ++l, y += 8)
        iq1_group(dl, kIQ1SGrid[b.qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)], delta, y);
    }
  }
}

void dq_iq1_m(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* blk = src + i * int64_t(sizeof(BlockIQ1_M));
    const auto b = block_at<BlockIQ1_M>(src, i);
    const float d = f16_to_f32(iq1m_scale_bits(blk));
    uint16_t sc[4];
    std::memcpy(sc, b.scales, 8);
    for (int ib = 0; ib < 8; ++ib) {
      const int shift = 6 * (ib % 2);
      const float dl[2] = {d * float(2 * ((sc[ib / 2] >> shift) & 7) + 1),
                           d * float(2 * ((sc[ib / 2] >> (shift + 3)) & 7) + 1)};
      for (int l = 0; l < 4; ++l, y += 8) {
        const int h = b.qh[2 * ib + l / 2] >> (4 * (l % 2));  // this group's nibble
        const int idx = b.qs[4 * ib + l] | ((h & 7) << 8);
        iq1_group(dl[l / 2], kIQ1SGrid[idx], h & 8 ? -kIQ1Delta : kIQ1Delta, y);
      }
    }
  }
}

// Trit n (0..4) of a TQ1_0 byte: the byte times 3^n mod 256, times 3, over 256.
int tq1_trit(uint8_t byte, int n) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const uint8_t q = uint8_t(byte * kPow3[n]);
  return (q * 3) >> 8;
}

void dq_tq1_0(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = block_at<BlockTQ1_0>(src, i);
    const float d = f16_to_f32(b.d);
    for (int n = 0; n < 5; ++n)
      for (int m = 0; m < 32; ++m) *y++ = float(tq1_trit(b.qs[m], n) - 1) * d;
    for (int n = 0; n < 5; ++n)
      for (int m = 0; m < 16; ++m) *y++ = float(tq1_trit(b.qs[32 + m], n) - 1) * d;
    for (int n = 0; n < 4; ++n)
      for (int m = 0; m < 4; ++m) *y++ = float(tq1_trit(b.qh[m], n) - 1) * d;
  }
}

void dq_tq2_0(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = block_at<BlockTQ2_0>(src, i);
    const float d = f16_to_f32(b.d);
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < 4; ++l)
        for (int m = 0; m < 32; ++m) *y++ = float(((b.qs[32 * h + m] >> (2 * l)) & 3) - 1) * d;
  }
}

void dq_mxfp4(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const auto b = block_at<BlockMXFP4>(src, i);
    const float d = mxfp4_half_scale(b.e);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = float(kMXFP4Values[b.qs[j] & 0xF]) * d;
      y[j + kQK / 2] = float(kMXFP4Values[b.qs[j] >> 4]) * d;
    }
  }
}

}  // namespace

void dequant_row(DType t, const void* src_v, float* dst, int64_t n) {
  const int64_t bs = dtype_block_size(t);
  INVAR_CHECK(n >= 0 && n % bs == 0, "dequant_row: " + std::to_string(n) + " elements of " +
                                         std::string(dtype_name(t)) + " (block size " +
                                         std::to_string(bs) + ")");
  const auto* src = static_cast<const uint8_t*>(src_v);
  const int64_t nb = n / bs;
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, size_t(n) * 4);
      return;
    case DType::F16:
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = t == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
      return;
    case DType::Q4_0:
      return dq_q4_0(src, dst, nb);
    case DType::Q4_1:
      return dq_q4_1(src, dst, nb);
    case DType::Q5_0:
      return dq_q5_0(src, dst, nb);
    case DType::Q5_1:
      return dq_q5_1(src, dst, nb);
    case DType::Q8_0:
      return dq_q8_0(src, dst, nb);
    case DType::Q2_K:
      return dq_q2_k(src, dst, nb);
    case DType::Q3_K:
      return dq_q3_k(src, dst, nb);
    case DType::Q4_K:
      return dq_q45_k<BlockQ4_K, false>(src, dst, nb);
    case DType::Q5_K:
      return dq_q45_k<BlockQ5_K, true>(src, dst, nb);
    case DType::Q6_K:
      return dq_q6_k(src, dst, nb);
    case DType::IQ4_NL:
      return dq_iq4_nl(src, dst, nb);
    case DType::IQ4_XS:
      return dq_iq4_xs(src, dst, nb);
    case DType::IQ2_XXS:
      return dq_iq2_xxs(src, dst, nb);
    case DType::IQ2_XS:
      return dq_iq2_xs(src, dst, nb);
    case DType::IQ2_S:
      return dq_iq2_s(src, dst, nb);
    case DType::IQ3_XXS:
      return dq_iq3_xxs(src, dst, nb);
    case DType::IQ3_S:
      return dq_iq3_s(src, dst, nb);
    case DType::IQ1_S:
      return dq_iq1_s(src, dst, nb);
    case DType::IQ1_M:
      return dq_iq1_m(src, dst, nb);
    case DType::TQ1_0:
      return dq_tq1_0(src, dst, nb);
    case DType::TQ2_0:
      return dq_tq2_0(src, dst, nb);
    case DType::MXFP4:
      return dq_mxfp4(src, dst, nb);
  }
  INVAR_CHECK(false, "dequant_row: unknown dtype");
}

}  // namespace invar
