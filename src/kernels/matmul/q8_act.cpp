// The q8 profile's scalar references (q8_act.h): the activation quantiser and the integer dot
// products of Q4_K, Q5_K, Q6_K and Q8_0 weights in the canonical order.
#include "kernels/matmul/q8_act.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "quant/blocks.h"

namespace invar {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

constexpr uint32_t kTinyBits = 0x1f800000;  // 2^-64: smaller blocks quantise to zero
constexpr uint32_t kInfBits = 0x7f800000;

// One block of n activations (q8_act.h): codes q, returns the scale d.
float quantize_block(const float* x, int n, int8_t* q) {
  if (n <= 0) return 0.0f;  // (never: n is 32 or 256)
  uint32_t a = 0;
  for (int j = 0; j < n; ++j) a = std::max(a, bits_of(x[j]) & 0x7fffffff);
  if (a < kTinyBits || a >= kInfBits) {
    std::memset(q, 0, size_t(n));
    return a < kTinyBits ? 0.0f : std::numeric_limits<float>::quiet_NaN();
  }
  float amax;
  std::memcpy(&amax, &a, 4);
  const float inv = 127.0f / amax;
  for (int j = 0; j < n; ++j) {
    // Round to nearest even: |x·inv| ≤ 127.5 < 2^22, where adding 1.5·2^23 leaves the integer.
    const float r = (x[j] * inv + 12582912.0f) - 12582912.0f;
    q[j] = int8_t(r);
  }
  return amax / 127.0f;
}

// Σ_s sc_s · Σ_{j∈s} (q_j − off)·x_j for sub-blocks of `len`, codes from `code(j)`.
template <class Code>
int32_t scaled_dot(const int8_t* x, int n_sub, int len, const int* sc, Code&& code) {
  int32_t total = 0;
  for (int s = 0; s < n_sub; ++s) {
    int32_t dot = 0;
    for (int j = 0; j < len; ++j) dot += code(s * len + j) * int32_t(x[s * len + j]);
    total += sc[s] * dot;
  }
  return total;
}

float q45k_ref(const uint8_t* row, bool fifth, const Q8Rows& x, int64_t r) {
  const int64_t bytes = fifth ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
  const int8_t* xq = x.row_q(r);
  const float* xd = x.row_d(r);
  const int16_t* xs = x.row_sums(r);
  float acc = 0.0f;
  for (int64_t b = 0; b < x.k / 256; ++b) {
    const uint8_t* blk = row + b * bytes;
    const uint8_t* scales = blk + 4;
    const uint8_t* qh = blk + 16;
    const uint8_t* qs = blk + (fifth ? 48 : 16);
    int sc[8], mn[8];
    for (int s = 0; s < 8; ++s) {
      uint8_t a, m;
      k4_scale_min(s, scales, a, m);
      sc[s] = a;
      mn[s] = m;
    }
    // Weight j of the superblock: chunk j / 64, nibble (j / 32) % 2 of qs[32·(j / 64) + j % 32].
    auto code = [&](int j) {
      const int c = j / 64, hi = (j / 32) % 2, l = j % 32;
      int v = (qs[32 * c + l] >> (4 * hi)) & 0xF;
      if (fifth) v += ((qh[l] >> (2 * c + hi)) & 1) << 4;
      return v;
    };
    const int32_t is = scaled_dot(xq + b * 256, 8, 32, sc, code);
    int32_t im = 0;
    for (int s = 0; s < 8; ++s)
      im += mn[s] * (int32_t(xs[b * 16 + 2 * s]) + xs[b * 16 + 2 * s + 1]);
    const float dd = f16_at(blk) * xd[b], dm = f16_at(blk + 2) * xd[b];
    acc = acc + std::fma(-dm, float(im), dd * float(is));
  }
  return acc;
}

float q6k_ref(const uint8_t* row, const Q8Rows& x, int64_t r) {
  const int8_t* xq = x.row_q(r);
  const float* xd = x.row_d(r);
  float acc = 0.0f;
  for (int64_t b = 0; b < x.k / 256; ++b) {
    const auto* blk = reinterpret_cast<const BlockQ6_K*>(row + b * sizeof(BlockQ6_K));
    int sc[16];
    for (int s = 0; s < 16; ++s) sc[s] = blk->scales[s];
    // Weight j: half h = j / 128, g = (j / 32) % 4, l = j % 32 (dequant.cpp's dq_q6_k).
    auto code = [&](int j) {
      const int h = j / 128, g = (j / 32) % 4, l = j % 32;
      const uint8_t lo = blk->ql[64 * h + l + 32 * (g % 2)] >> (4 * (g / 2));
      const int hi = (blk->qh[32 * h + l] >> (2 * g)) & 3;
      return ((lo & 0xF) | (hi << 4)) - 32;
    };
    const int32_t is = scaled_dot(xq + b * 256, 16, 16, sc, code);
    uint16_t dh;
    std::memcpy(&dh, &blk->d, 2);
    acc = acc + (f16_to_f32(dh) * xd[b]) * float(is);
  }
  return acc;
}

float q8_0_ref(const uint8_t* row, const Q8Rows& x, int64_t r) {
  const int8_t* xq = x.row_q(r);
  const float* xd = x.row_d(r);
  float lane[8] = {};
  for (int64_t b = 0; b < x.k / 32; ++b) {
    const uint8_t* blk = row + b * sizeof(BlockQ8_0);
    const auto* q = reinterpret_cast<const int8_t*>(blk + 2);
    int32_t is = 0;
    for (int j = 0; j < 32; ++j) is += int32_t(q[j]) * xq[b * 32 + j];
    lane[b % 8] = lane[b % 8] + (f16_at(blk) * xd[b]) * float(is);
  }
  return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

}  // namespace

Q8Format q8_format_of(DType t) {
  switch (t) {
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      return Q8Format::k256;
    case DType::Q8_0:
      return Q8Format::b32;
    default:
      return Q8Format::none;
  }
}

int64_t q8_rows_bytes(Q8Format f, int64_t m, int64_t k) {
  auto up64 = [](int64_t b) { return (b + 63) / 64 * 64; };
  const int64_t sums = f == Q8Format::k256 ? m * (k / 16) * 2 : 0;
  return up64(m * k) + up64(m * (k / q8_block(f)) * 4) + up64(sums) + up64(sums / 2);
}

Q8Rows q8_rows_at(void* buffer, Q8Format f, int64_t m, int64_t k) {
  INVAR_CHECK(f != Q8Format::none && k % q8_block(f) == 0);
  INVAR_CHECK(reinterpret_cast<uintptr_t>(buffer) % 64 == 0, "q8 rows: unaligned buffer");
  auto up64 = [](int64_t b) { return (b + 63) / 64 * 64; };
  auto* base = static_cast<uint8_t*>(buffer);
  Q8Rows r;
  r.format = f;
  r.m = m;
  r.k = k;
  r.q = reinterpret_cast<int8_t*>(base);
  r.d = reinterpret_cast<float*>(base + up64(m * k));
  if (f == Q8Format::k256) {
    uint8_t* at = base + up64(m * k) + up64(m * (k / 256) * 4);
    r.sums = reinterpret_cast<int16_t*>(at);
    r.sums32 = reinterpret_cast<int16_t*>(at + up64(m * (k / 16) * 2));
  }
  return r;
}

void q8_quantize_ref(const float* x, const Q8Rows& out, int64_t r0, int64_t r1) {
  q8_quantize_rows(x, out, r0, r1, quantize_block, [](const int8_t* q, int16_t* s16, int16_t* s32) {
    for (int g = 0; g < 16; ++g) {
      int v = 0;
      for (int j = 0; j < 16; ++j) v += q[16 * g + j];
      s16[g] = int16_t(v);
    }
    for (int g = 0; g < 8; ++g) s32[g] = int16_t(s16[2 * g] + s16[2 * g + 1]);
  });
}

void q8matmul_ref_range(const QuantView& w, const Q8Rows& x, float* y, int64_t n0, int64_t n1) {
  INVAR_CHECK(x.format == q8_format_of(w.type) && x.k == w.k);
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = w.data + n * w.row_bytes;
    for (int64_t r = 0; r < x.m; ++r) {
      float v = 0;
      switch (w.type) {
        case DType::Q4_K:
          v = q45k_ref(row, false, x, r);
          break;
        case DType::Q5_K:
          v = q45k_ref(row, true, x, r);
          break;
        case DType::Q6_K:
          v = q6k_ref(row, x, r);
          break;
        default:
          v = q8_0_ref(row, x, r);
          break;
      }
      y[r * w.n + n] = v;
    }
  }
}

const Q8Kernels* q8_kernels(SimdLevel level) {
  simd_count(level);
  switch (level) {
    case SimdLevel::avx512:
      return &kQ8KernelsAvx512;
    case SimdLevel::avx2:
      return &kQ8KernelsAvx2;
    default:
      return nullptr;
  }
}

}  // namespace invar
