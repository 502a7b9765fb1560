// Quantisers of the legacy types (Q4_0 … Q8_0), IQ4_NL and IQ4_XS, and the dispatch over all
// types. The K-quants are in quantize_k.cpp, the IQ1 / IQ2 / IQ3 types in quantize_iq.cpp, TQ1_0,
// TQ2_0 and MXFP4 in quantize_ternary.cpp. Codes are always computed from the scale as the file
// will store it (F16-rounded), so dequantisation reproduces the fit that was chosen.
#include "quant/quantize.h"

#include <cstring>
#include <string>

#include "core/error.h"
#include "quant/blocks.h"
#include "quant/quantize_fit.h"

namespace invar {

// quantize_k.cpp
void quantize_q2_k(const float* x, BlockQ2_K& b);
void quantize_q3_k(const float* x, BlockQ3_K& b);
void quantize_q4_k(const float* x, BlockQ4_K& b);
void quantize_q5_k(const float* x, BlockQ5_K& b);
void quantize_q6_k(const float* x, BlockQ6_K& b);
// quantize_iq.cpp
void quantize_iq2_xxs(const float* x, BlockIQ2_XXS& b);
void quantize_iq2_xs(const float* x, BlockIQ2_XS& b);
void quantize_iq2_s(const float* x, BlockIQ2_S& b);
void quantize_iq3_xxs(const float* x, BlockIQ3_XXS& b);
void quantize_iq3_s(const float* x, BlockIQ3_S& b);
void quantize_iq1_s(const float* x, BlockIQ1_S& b);
void quantize_iq1_m(const float* x, BlockIQ1_M& b);
// quantize_ternary.cpp
void quantize_tq1_0(const float* x, BlockTQ1_0& b);
void quantize_tq2_0(const float* x, BlockTQ2_0& b);
void quantize_mxfp4(const float* x, BlockMXFP4& b);

namespace {

using namespace quant_fit;

// Codes q in [0, 2·half) of x / d + half (the signed types' offset encoding).
void symmetric_codes(const float* x, int n, float d, int half, int* q) {
  const float id = d != 0 ? 1.0f / d : 0.0f;
  for (int i = 0; i < n; ++i) q[i] = clampi(nearest(x[i] * id) + half, 0, 2 * half - 1);
}

void pack_nibbles(const int* q, uint8_t* qs) {
  for (int j = 0; j < kQK / 2; ++j) qs[j] = uint8_t((q[j] & 0xF) | ((q[j + kQK / 2] & 0xF) << 4));
}

void pack_fifth_bits(const int* q, uint8_t* qh_bytes) {
  uint32_t qh = 0;
  for (int j = 0; j < kQK; ++j) qh |= uint32_t((q[j] >> 4) & 1) << j;
  std::memcpy(qh_bytes, &qh, 4);
}

void quantize_q4_0(const float* x, BlockQ4_0& b) {
  const float d = f16_round(symmetric_scale(x, kQK, 8));
  b.d = f32_to_f16(d);
  int q[kQK];
  symmetric_codes(x, kQK, d, 8, q);
  pack_nibbles(q, b.qs);
}

void quantize_q5_0(const float* x, BlockQ5_0& b) {
  const float d = f16_round(symmetric_scale(x, kQK, 16));
  b.d = f32_to_f16(d);
  int q[kQK];
  symmetric_codes(x, kQK, d, 16, q);
  pack_nibbles(q, b.qs);
  pack_fifth_bits(q, b.qh);
}

// Q4_1 / Q5_1: w = d·q + m with m the block minimum (any sign).
template <class B>
void quantize_affine(const float* x, B& b, int nmax, int* q) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < kQK; ++i) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
  }
  const float d = f16_round((hi - lo) / float(nmax));
  const float m = f16_round(lo);
  b.d = f32_to_f16(d);
  b.m = f32_to_f16(m);
  const float id = d != 0 ? 1.0f / d : 0.0f;
  for (int i = 0; i < kQK; ++i) q[i] = clampi(nearest((x[i] - m) * id), 0, nmax);
}

void quantize_q4_1(const float* x, BlockQ4_1& b) {
  int q[kQK];
  quantize_affine(x, b, 15, q);
  pack_nibbles(q, b.qs);
}

void quantize_q5_1(const float* x, BlockQ5_1& b) {
  int q[kQK];
  quantize_affine(x, b, 31, q);
  pack_nibbles(q, b.qs);
  pack_fifth_bits(q, b.qh);
}

// ggml's quantize_row_q8_0_ref: d = amax/127, codes round(x/d) (half away from zero) with the
// unrounded d, d stored as F16 (invar's Q8_0 files have always been written this way).
void quantize_q8_0(const float* x, BlockQ8_0& b) {
  float amax = 0;
  for (int i = 0; i < kQK; ++i) amax = std::fabs(x[i]) > amax ? std::fabs(x[i]) : amax;
  const float d = amax / 127.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d);
  for (int i = 0; i < kQK; ++i) b.qs[i] = int8_t(std::round(x[i] * id));
}

// Index of the IQ4_NL grid value nearest to v.
int iq4_nearest(float v) {
  int best = 0;
  float err = std::fabs(v - float(kIQ4NLValues[0]));
  for (int k = 1; k < 16; ++k) {
    const float e = std::fabs(v - float(kIQ4NLValues[k]));
    if (e < err) {
      err = e;
      best = k;
    }
  }
  return best;
}

// Squared error of n values on the grid with scale d (codes chosen by nearest grid value).
double iq4_error(const float* x, int n, float d, int* q) {
  double e = 0;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  for (int i = 0; i < n; ++i) {
    q[i] = iq4_nearest(x[i] * id);
    const double r = double(d) * kIQ4NLValues[q[i]] - x[i];
    e += r * r;
  }
  return e;
}

// Scale of a block on the IQ4_NL grid: the max fit (largest magnitude on −127), then the
// least-squares scale of its codes if that is better.
float iq4_scale(const float* x, int n) {
  const float d0 = symmetric_scale(x, n, 127);
  if (d0 == 0) return 0;
  int q[kQK];
  const double e0 = iq4_error(x, n, d0, q);
  double sxv = 0, svv = 0;
  for (int i = 0; i < n; ++i) {
    sxv += double(x[i]) * kIQ4NLValues[q[i]];
    svv += double(kIQ4NLValues[q[i]]) * kIQ4NLValues[q[i]];
  }
  const float d1 = float(sxv / svv);
  int q1[kQK];
  return iq4_error(x, n, d1, q1) < e0 ? d1 : d0;
}

void quantize_iq4_nl(const float* x, BlockIQ4_NL& b) {
  const float d = f16_round(iq4_scale(x, kQK));
  b.d = f32_to_f16(d);
  int q[kQK];
  iq4_error(x, kQK, d, q);
  pack_nibbles(q, b.qs);
}

void quantize_iq4_xs(const float* x, BlockIQ4_XS& b) {
  constexpr int kSub = kQK_K / 32;
  float s[kSub], max_s = 0;
  for (int ib = 0; ib < kSub; ++ib) {
    s[ib] = iq4_scale(x + 32 * ib, 32);
    if (std::fabs(s[ib]) > std::fabs(max_s)) max_s = s[ib];
  }
  // 6-bit signed sub-scales: the largest maps to −32.
  const float d = f16_round(max_s / -32.0f);
  b.d = f32_to_f16(d);
  const float id = d != 0 ? 1.0f / d : 0.0f;
  b.scales_h = 0;
  std::memset(b.scales_l, 0, sizeof b.scales_l);
  for (int ib = 0; ib < kSub; ++ib) {
    const int l = clampi(nearest(s[ib] * id), -32, 31);
    const int ls = l + 32;
    b.scales_l[ib / 2] |= uint8_t((ls & 0xF) << (4 * (ib % 2)));
    b.scales_h |= uint16_t((ls >> 4) << (2 * ib));
    const float dl = d * float(l);
    int q[32];
    iq4_error(x + 32 * ib, 32, dl, q);
    for (int j = 0; j < 16; ++j) b.qs[16 * ib + j] = uint8_t(q[j] | (q[j + 16] << 4));
  }
}

template <class B, void (*F)(const float*, B&)>
void blocks(const float* x, uint8_t* dst, int64_t n, int64_t bs) {
  for (int64_t i = 0; i < n / bs; ++i) {
    B b{};
    F(x + i * bs, b);
    std::memcpy(dst + i * int64_t(sizeof(B)), &b, sizeof(B));
  }
}

}  // namespace

void quantize_row(DType t, const float* x, void* dst_v, int64_t n) {
  const int64_t bs = dtype_block_size(t);
  INVAR_CHECK(n >= 0 && n % bs == 0, "quantize_row: " + std::to_string(n) + " elements of " +
                                         std::string(dtype_name(t)) + " (block size " +
                                         std::to_string(bs) + ")");
  auto* dst = static_cast<uint8_t*>(dst_v);
  switch (t) {
    case DType::F32:
      std::memcpy(dst, x, size_t(n) * 4);
      return;
    case DType::F16:
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = t == DType::F16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case DType::Q4_0:
      return blocks<BlockQ4_0, quantize_q4_0>(x, dst, n, bs);
    case DType::Q4_1:
      return blocks<BlockQ4_1, quantize_q4_1>(x, dst, n, bs);
    case DType::Q5_0:
      return blocks<BlockQ5_0, quantize_q5_0>(x, dst, n, bs);
    case DType::Q5_1:
      return blocks<BlockQ5_1, quantize_q5_1>(x, dst, n, bs);
    case DType::Q8_0:
      return blocks<BlockQ8_0, quantize_q8_0>(x, dst, n, bs);
    case DType::Q2_K:
      return blocks<BlockQ2_K, quantize_q2_k>(x, dst, n, bs);
    case DType::Q3_K:
      return blocks<BlockQ3_K, quantize_q3_k>(x, dst, n, bs);
    case DType::Q4_K:
      return blocks<BlockQ4_K, quantize_q4_k>(x, dst, n, bs);
    case DType::Q5_K:
      return blocks<BlockQ5_K, quantize_q5_k>(x, dst, n, bs);
    case DType::Q6_K:
      return blocks<BlockQ6_K, quantize_q6_k>(x, dst, n, bs);
    case DType::IQ4_NL:
      return blocks<BlockIQ4_NL, quantize_iq4_nl>(x, dst, n, bs);
    case DType::IQ4_XS:
      return blocks<BlockIQ4_XS, quantize_iq4_xs>(x, dst, n, bs);
    case DType::IQ2_XXS:
      return blocks<BlockIQ2_XXS, quantize_iq2_xxs>(x, dst, n, bs);
    case DType::IQ2_XS:
      return blocks<BlockIQ2_XS, quantize_iq2_xs>(x, dst, n, bs);
    case DType::IQ2_S:
      return blocks<BlockIQ2_S, quantize_iq2_s>(x, dst, n, bs);
    case DType::IQ3_XXS:
      return blocks<BlockIQ3_XXS, quantize_iq3_xxs>(x, dst, n, bs);
    case DType::IQ3_S:
      return blocks<BlockIQ3_S, quantize_iq3_s>(x, dst, n, bs);
    case DType::IQ1_S:
      return blocks<BlockIQ1_S, quantize_iq1_s>(x, dst, n, bs);
    case DType::IQ1_M:
      return blocks<BlockIQ1_M, quantize_iq1_m>(x, dst, n, bs);
    case DType::TQ1_0:
      return blocks<BlockTQ1_0, quantize_tq1_0>(x, dst, n, bs);
    case DType::TQ2_0:
      return blocks<BlockTQ2_0, quantize_tq2_0>(x, dst, n, bs);
    case DType::MXFP4:
      return blocks<BlockMXFP4, quantize_mxfp4>(x, dst, n, bs);
  }
  INVAR_CHECK(false, "quantize_row: unknown dtype");
}

std::string quantize_supported_list() {
  std::string s;
  for (DType t : kAllDTypes) s += (s.empty() ? "" : ", ") + std::string(dtype_name(t));
  return s;
}

}  // namespace invar
