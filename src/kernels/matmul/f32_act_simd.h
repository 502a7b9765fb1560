// Private to the matmul kernels: the quantised product (f32_act.h) over a 16-float vector type V
// (vec_avx2.h, vec_avx512.h), shared by the AVX2 and AVX-512 files; F32, F16 and BF16 weights
// take the same paths in the same order (f32_act_dense.h).
//
// Every output keeps one 16-lane accumulator whose lane l sees k ≡ l (mod 16) in ascending k, one
// FMA per term, and ends with V::sum (the reduce.h tree): the canonical order of f32_act.h. Which
// outputs run side by side, how K is cut into chunks (an accumulator parked in the scratch between
// chunks is stored and reloaded unchanged) and whether weights come from registers or from the
// dequantised buffer (the same values, stored and reloaded) change no bit.
//
// V provides, besides the float operations: from_i8v (16 signed bytes to F32), kDirectRows and
// direct_panels<R>() (few-rows path: R activation rows × P weight rows), kQTileRows / kQTileCols
// (register tile of the many-rows path).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/matmul/f32_act.h"
#include "kernels/matmul/f32_act_decode_avx2.h"
#include "kernels/matmul/f32_act_decode_avx512.h"
#include "kernels/matmul/f32_act_dense.h"
#include "kernels/matmul/f32_act_prefill.h"
#include "kernels/matmul/f32_act_unpack.h"

namespace invar::qmatmul_tiles {
namespace {

#define QT_INLINE inline __attribute__((always_inline))

template <class D, size_t... I>
QT_INLINE std::array<D, sizeof...(I)> decoders(const uint8_t* const* blk,
                                               std::index_sequence<I...>) {
  return {D(blk[I])...};
}

// One block of each of P rows (at blk[p]) against R activation rows (xb, stride ldx).
template <class V, class D, int R, int P>
QT_INLINE void direct_block(const uint8_t* const* blk, const float* xb, int64_t ldx,
                            V (&acc)[R][P]) {
  const std::array<D, P> dec = decoders<D>(blk, std::make_index_sequence<P>{});
#pragma GCC unroll 16
  for (int c = 0; c < D::kBlock / 16; ++c) {
    V wv[P];
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) wv[p] = dec[p].chunk(c);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const V xv = V::load(xb + r * ldx + 16 * c);
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) acc[r][p] = V::fma(wv[p], xv, acc[r][p]);
    }
  }
}

// Few rows (decode): R activation rows × P weight rows starting at row n0, the blocks of the P
// rows decoded in registers as they stream in, each weight vector used for R FMAs. Small blocks
// go G at a time (256 weights a step), so per-step costs are paid once per 256 weights.
template <class V, class D, int R, int P>
void rows_direct(const QuantView& w, int64_t n0, const float* x, float* y) {
  constexpr int G = D::kBlock >= 256 ? 1 : 256 / D::kBlock;
  const uint8_t* row[P];
  for (int p = 0; p < P; ++p) row[p] = w.data + (n0 + p) * w.row_bytes;
  V acc[R][P];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) acc[r][p] = V::zero();
  }
  const int64_t n_blocks = w.k / D::kBlock;
  int64_t b = 0;
  for (; b + G <= n_blocks; b += G) {
    qdecode::prefetch_ahead(row[0], P * w.row_bytes, P * G * D::kBytes, b / G);
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      const uint8_t* blk[P];
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        blk[p] = row[p] + (b + g) * D::kBytes;
        asm volatile("" : "+r"(blk[p]));  // a scalar address, not lanes of a vector of pointers
      }
      direct_block<V, D, R, P>(blk, x + (b + g) * D::kBlock, w.k, acc);
    }
  }
  for (; b < n_blocks; ++b) {
    const uint8_t* blk[P];
    for (int p = 0; p < P; ++p) blk[p] = row[p] + b * D::kBytes;
    direct_block<V, D, R, P>(blk, x + b * D::kBlock, w.k, acc);
  }
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) y[r * w.n + n0 + p] = V::sum(acc[r][p]);
}

// V holds one __m512 (vec_avx512.h), not two __m256 (vec_avx2.h).
template <class V>
constexpr bool is_avx512() {
  if constexpr (requires(V a) { a.v; })
    return sizeof(V::v) == 64;
  else
    return false;
}

template <class V, class D, int R>
void direct_run(const QuantView& w, const float* x, int64_t rows, float* y, int64_t n0,
                int64_t n1) {
  if constexpr (R > 1) {
    if (rows < R) return direct_run<V, D, R - 1>(w, x, rows, y, n0, n1);
  }
  int64_t n = n0;
  if constexpr (is_avx512<V>()) {
    // AVX-512 kernels of the K-quant types of Q4_K_M / Q5_K_M files (f32_act_decode_avx512.h).
    // 4 weight rows side by side at every M (f32_act_decode_avx512.h says why not 8 at M = 1).
    constexpr int P = 4;
    if constexpr (std::is_same_v<D, qdecode::Q8_0<V>>) {
      for (; n + P <= n1; n += P) qdirect512::q80_rows<V, R, P>(w, n, x, y);
    } else if constexpr (std::is_same_v<D, qdecode::Q4_K<V>>) {
      for (; n + P <= n1; n += P) qdirect512::q4k_rows<V, R, P>(w, n, x, y);
    } else if constexpr (std::is_same_v<D, qdecode::Q5_K<V>>) {
      for (; n + P <= n1; n += P) qdirect512::q5k_rows<V, R, P>(w, n, x, y);
    } else if constexpr (std::is_same_v<D, qdecode::Q6_K<V>>) {
      for (; n + P <= n1; n += P) qdirect512::q6k_rows<V, R, P>(w, n, x, y);
    }
  } else {
    // AVX2 kernels of the same types (f32_act_decode_avx2.h), P rows then one at a time.
    constexpr int P = qdirect256::panels<R>();
    auto rows = [&]<int Q>() __attribute__((always_inline)) {
      for (; n + Q <= n1; n += Q) {
        if constexpr (std::is_same_v<D, qdecode::Q8_0<V>>)
          qdirect256::q80_rows<V, R, Q>(w, n, x, y);
        else if constexpr (std::is_same_v<D, qdecode::Q4_K<V>>)
          qdirect256::k4_rows<V, R, Q, false>(w, n, x, y);
        else if constexpr (std::is_same_v<D, qdecode::Q5_K<V>>)
          qdirect256::k4_rows<V, R, Q, true>(w, n, x, y);
        else if constexpr (std::is_same_v<D, qdecode::Q6_K<V>>)
          qdirect256::q6k_rows<V, R, Q>(w, n, x, y);
        else
          return;
      }
    };
    rows.template operator()<P>();
    rows.template operator()<1>();
  }
  constexpr int P = V::template direct_panels<R>();
  for (; n + P <= n1; n += P) rows_direct<V, D, R, P>(w, n, x, y);
  for (; n < n1; ++n) rows_direct<V, D, R, 1>(w, n, x, y);
}

// Batched decode (M = kDirectRows + 1 .. V::kBatchedRows): the few-rows kernels in passes of
// kDirectRows activation rows over groups of 16 outputs. A group's weight rows come from memory
// in the first pass and from L1/L2 in the others, so each weight is read from memory once per
// step; each pass decodes the group again, which costs less than the many-rows tiles' packing
// and dequantised buffer at these M. Every output keeps its lane order (no bit moves).
template <class V, class D>
void direct_passes(const QuantView& w, const float* x, int64_t rows, float* y, int64_t n0,
                   int64_t n1) {
  constexpr int64_t kGroup = 16;
  for (int64_t n = n0; n < n1; n += kGroup) {
    const int64_t e = std::min(n + kGroup, n1);
    for (int64_t r0 = 0; r0 < rows; r0 += V::kDirectRows)
      direct_run<V, D, V::kDirectRows>(
          w, x + r0 * w.k, std::min<int64_t>(V::kDirectRows, rows - r0), y + r0 * w.n, n, e);
  }
}

template <class V, class D>
void run_typed(const QuantView& w, const float* x, int64_t rows, float* y, int64_t n0, int64_t n1,
               float* scratch) {
  if (rows <= V::kDirectRows) {
    direct_run<V, D, V::kDirectRows>(w, x, rows, y, n0, n1);
  } else if (rows <= V::kBatchedRows) {
    direct_passes<V, D>(w, x, rows, y, n0, n1);
  } else {
    qprefill::tiles_run<V, D>(w, x, rows, y, n0, n1, scratch);
  }
}

// F32 / F16 / BF16 (f32_act_dense.h): the many-rows tiles need whole 16-weight blocks.
template <class V, DType T>
void run_dense(const QuantView& w, const float* x, int64_t rows, float* y, int64_t n0, int64_t n1,
               float* scratch) {
  if (rows <= V::kDirectRows || w.k % 16 != 0) {
    qdense::direct_rows_all<V, T>(w, x, rows, y, n0, n1);
  } else {
    qprefill::tiles_run<V, qdense::Dense<V, T>>(w, x, rows, y, n0, n1, scratch);
  }
}

// Outputs [n0, n1) of every row; scratch: kQScratchFloats floats of this thread.
template <class V>
void qmatmul_rows(const QuantView& w, const float* x, int64_t rows, float* y, int64_t n0,
                  int64_t n1, float* scratch) {
  using namespace qdecode;
  switch (w.type) {
    case DType::F32:
      return run_dense<V, DType::F32>(w, x, rows, y, n0, n1, scratch);
    case DType::F16:
      return run_dense<V, DType::F16>(w, x, rows, y, n0, n1, scratch);
    case DType::BF16:
      return run_dense<V, DType::BF16>(w, x, rows, y, n0, n1, scratch);
    case DType::Q8_0:
      return run_typed<V, Q8_0<V>>(w, x, rows, y, n0, n1, scratch);
    case DType::Q4_0:
      return run_typed<V, Q4_0<V>>(w, x, rows, y, n0, n1, scratch);
    case DType::Q4_1:
      return run_typed<V, Q4_1<V>>(w, x, rows, y, n0, n1, scratch);
    case DType::Q5_0:
      return run_typed<V, Q5_0<V>>(w, x, rows, y, n0, n1, scratch);
    case DType::Q5_1:
      return run_typed<V, Q5_1<V>>(w, x, rows, y, n0, n1, scratch);
    case DType::Q2_K:
      return run_typed<V, Q2_K<V>>(w, x, rows, y, n0, n1, scratch);
    case DType::Q3_K:
      return run_typed<V, Q3_K<V>>(w, x, rows, y, n0, n1, scratch);
    case DType::Q4_K:
      return run_typed<V, Q4_K<V>>(w, x, rows, y, n0, n1, scratch);
    case DType::Q5_K:
      return run_typed<V, Q5_K<V>>(w, x, rows, y, n0, n1, scratch);
    case DType::Q6_K:
      return run_typed<V, Q6_K<V>>(w, x, rows, y, n0, n1, scratch);
    case DType::IQ4_NL:
      return run_typed<V, IQ4_NL<V>>(w, x, rows, y, n0, n1, scratch);
    case DType::IQ4_XS:
      return run_typed<V, IQ4_XS<V>>(w, x, rows, y, n0, n1, scratch);
    case DType::IQ2_XXS:
      return run_typed<V, IQ2_XXS<V>>(w, x, rows, y, n0, n1, scratch);
    case DType::IQ2_XS:
      return run_typed<V, IQ2_XS<V>>(w, x, rows, y, n0, n1, scratch);
    case DType::IQ2_S:
      return run_typed<V, IQ2_S<V>>(w, x, rows, y, n0, n1, scratch);
    case DType::IQ3_XXS:
      return run_typed<V, IQ3_XXS<V>>(w, x, rows, y, n0, n1, scratch);
    case DType::IQ3_S:
      return run_typed<V, IQ3_S<V>>(w, x, rows, y, n0, n1, scratch);
    case DType::IQ1_S:
      return run_typed<V, IQ1_S<V>>(w, x, rows, y, n0, n1, scratch);
    case DType::IQ1_M:
      return run_typed<V, IQ1_M<V>>(w, x, rows, y, n0, n1, scratch);
    case DType::TQ1_0:
      return run_typed<V, TQ1_0<V>>(w, x, rows, y, n0, n1, scratch);
    case DType::TQ2_0:
      return run_typed<V, TQ2_0<V>>(w, x, rows, y, n0, n1, scratch);
    case DType::MXFP4:
      return run_typed<V, MXFP4<V>>(w, x, rows, y, n0, n1, scratch);
    default:
      return qmatmul_ref_range(w, x, rows, y, n0, n1);
  }
}

#undef QT_INLINE

}  // namespace
}  // namespace invar::qmatmul_tiles
